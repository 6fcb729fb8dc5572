"""``mnemon tree``: the lineage drawn from the logs, human and --json; states open/ended/broken."""

from __future__ import annotations

import json
import os

from mnemon.lineage.fork import fork
from mnemon.lineage.tree import build_tree, tree_json
from mnemon.orchestrator.cli import main
from mnemon.session.records import SessionEnded

from .util import STARTED, answer, busy_parent, new_agent, prompt, start_call, tool_turn


def run_tree(args, capsys):
    capsys.readouterr()
    code = main(["tree", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def family(root):
    p = busy_parent(root, "a1")
    start_call(p)
    c2 = fork(root, p, "a2", task="first child")
    answer(c2, "done")
    c2.append(SessionEnded(reason="done"))
    c10 = fork(root, p, "a10", kind="fresh", task="fresh child")
    start_call(c2)  # a call after its end is fine for the tree: it reports what the log says
    g = fork(root, c2, "a3", task="grandchild")
    tool_turn(g, "g works", "ls", "x")
    return p, c2, c10, g


def test_tree_json(run_root, capsys):
    p, c2, c10, g = family(run_root)
    before = {f: f.stat().st_mtime_ns for f in (run_root / "agents").rglob("*")}
    code, out, err = run_tree([str(run_root), "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert [n["agent"] for n in got] == ["a1", "a2", "a3", "a10"]  # depth first, natural order
    by = {n["agent"]: n for n in got}
    assert all(set(n) == {"agent", "parent", "kind", "turns", "resident", "evicted", "state"}
               for n in got)
    assert by["a1"] == {"agent": "a1", "parent": None, "kind": None,
                        "turns": len(p.ctx.turns),
                        "resident": sum(t.state == "resident" for t in p.ctx.turns),
                        "evicted": sum(t.state == "evicted" for t in p.ctx.turns),
                        "state": "open"}
    assert by["a1"]["evicted"] == 6
    assert by["a2"]["parent"] == "a1" and by["a2"]["kind"] == "mnemon"
    assert by["a2"]["state"] == "ended"
    assert by["a2"]["turns"] == len(c2.ctx.turns) == len(p.ctx.turns) - 1 + 3
    assert by["a10"] == {"agent": "a10", "parent": "a1", "kind": "fresh", "turns": 1,
                         "resident": 1, "evicted": 0, "state": "open"}
    assert by["a3"]["parent"] == "a2" and by["a3"]["evicted"] == 6
    assert tree_json(run_root) == got
    after = {f: f.stat().st_mtime_ns for f in (run_root / "agents").rglob("*")}
    assert before == after  # read-only


def test_tree_human(run_root, capsys):
    family(run_root)
    code, out, _ = run_tree([str(run_root)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("a1 [root] ") and lines[0].endswith(" - open")
    assert lines[1].startswith("|-- a2 [mnemon] ") and lines[1].endswith(" - ended")
    assert lines[2].startswith("|   `-- a3 [mnemon] ")
    assert lines[3].startswith("`-- a10 [fresh] 1 turns: 1 resident, 0 evicted - open")
    assert "evicted" in lines[0] and "6 evicted" in lines[0]
    assert all(line.isascii() for line in lines)
    # an agent directory inside the run finds the run root
    code, out2, _ = run_tree([str(run_root / "agents" / "a2")], capsys)
    assert code == 0 and out2 == out


def test_broken_states(run_root, capsys):
    p, c2, c10, g = family(run_root)
    # a2's parent file loses a byte it points at: a2 and a3 (which point into a1) no longer fold
    data = bytearray((run_root / "agents/a1/record.jsonl").read_bytes())
    i = data.index(b"part 5 holds")
    data[i:i + 4] = b"PART"
    (run_root / "agents/a1/record.jsonl").write_bytes(bytes(data))
    # a hand-edited log that does not fold at all
    (run_root / "agents/zz").mkdir()
    (run_root / "agents/zz/record.jsonl").write_text('{"t":"UserPrompt","turn":1,"text":"x"}\n')
    got = {n["agent"]: n for n in tree_json(run_root)}
    assert got["a1"]["state"] == "open"
    assert got["a2"]["state"] == "broken" and got["a3"]["state"] == "broken"
    assert got["a2"]["parent"] == "a1" and got["a2"]["kind"] == "mnemon"  # from SessionStarted
    assert got["a10"]["state"] == "open"
    assert got["zz"] == {"agent": "zz", "parent": None, "kind": None, "turns": 0, "resident": 0,
                         "evicted": 0, "state": "broken"}
    code, out, _ = run_tree([str(run_root)], capsys)
    assert code == 0
    line = next(l for l in out.splitlines() if " a2 " in l)
    assert "broken" in line and "agents/a2/record.jsonl:2:" in line and "digest mismatch" in line


def test_torn_tail_is_reported_and_left_alone(run_root, capsys):
    family(run_root)
    path = run_root / "agents/a3/record.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"t":"Steer')
    size = path.stat().st_size
    code, out, err = run_tree([str(run_root), "--json"], capsys)
    assert code == 0 and "torn tail" in err and "a3" in err
    assert {n["agent"]: n for n in json.loads(out)}["a3"]["state"] == "open"
    assert path.stat().st_size == size


def test_orphans_and_cycles(run_root, capsys):
    p, c2, c10, g = family(run_root)
    os.remove(run_root / "agents/a1/record.jsonl")
    roots = build_tree(run_root)
    assert [r.agent for r in roots] == ["a2", "a10"] and roots[0].orphan
    code, out, _ = run_tree([str(run_root)], capsys)
    assert "parent a1 missing" in out.splitlines()[0]
    # a parent cycle written by hand: both still drawn, once each
    for a, parent in (("x1", "x2"), ("x2", "x1")):
        (run_root / "agents" / a).mkdir()
        (run_root / "agents" / a / "record.jsonl").write_text(
            json.dumps({"t": "SessionStarted", "agent": a, "parent": parent, "kind": "fresh"}) + "\n")
    agents = [n["agent"] for n in tree_json(run_root)]
    assert sorted(agents) == sorted(["a2", "a3", "a10", "x1", "x2"]) and len(agents) == 5


def test_tree_errors(tmp_path, capsys):
    code, _, err = run_tree([str(tmp_path / "nope")], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    code, _, err = run_tree([str(tmp_path)], capsys)
    assert code == 2 and "run root" in err
    (tmp_path / "run.json").write_text('{"format": 99}')
    code, _, err = run_tree([str(tmp_path)], capsys)
    assert code == 2 and "format" in err


def test_empty_run(run_root, capsys):
    code, out, _ = run_tree([str(run_root), "--json"], capsys)
    assert code == 0 and json.loads(out) == []


def test_tree_survives_pointers_that_escape_as_os_errors(run_root, capsys):
    """Pointers that runroot lets escape as OSError/ValueError still draw as broken."""
    from .util import rewrite_inherited

    p = new_agent(run_root, "p", **STARTED)
    prompt(p, "q")
    answer(p, "a")
    start_call(p)
    for i, src in enumerate(["agents", "agents/p/record.jsonl\x00", None]):
        fork(run_root, p, f"c{i}", task="t").close()

        def edit(o, src=src):
            for x in o["turns"]:
                if src is None:
                    x["at"]["loci"][0][0] = -5
                else:
                    x["at"]["source"] = src
        rewrite_inherited(run_root / f"agents/c{i}/record.jsonl", edit)
    got = {n["agent"]: n["state"] for n in tree_json(run_root)}
    assert got == {"p": "open", "c0": "broken", "c1": "broken", "c2": "broken"}
    code, out, _ = run_tree([str(run_root)], capsys)
    assert code == 0 and out.count("broken") == 3
