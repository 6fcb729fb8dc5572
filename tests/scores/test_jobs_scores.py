"""Scores on every surface of a job: the worked example (docs/examples/scores) run offline
with its two variants, rescored, summarised, compared; a judge killed mid-run resumed without
re-asking a recorded verdict; job files that cannot score refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mnemon.orchestrator.jobs.results import read_results
from mnemon.orchestrator.jobs.variants import read_rows
from mnemon.orchestrator.scores.stats import paired
from mnemon.orchestrator.scores.summary import compare

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scores"
SCORERS = ["correct", "exact", "judge", "brief"]


def mnemon(*args, cwd: Path, check: bool = True, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mnemon", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=180, **kw)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """The example copied and run once: its run root, both variants done and scored."""
    where = tmp_path_factory.mktemp("quiz") / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    done = mnemon("run", "quiz.toml", cwd=where)
    assert "variant synod.n=1:" in done.stdout and "variant synod.n=3:" in done.stdout
    return where / "quiz.run"


def scores_of(root: Path) -> dict:
    return {(r["variant"], r["task"]): r["scores"] for r in read_rows(root)}


def test_variants_run_side_by_side_into_one_run_root(ran):
    manifest = json.loads((ran / "variants.json").read_text())
    assert [v["name"] for v in manifest["variants"]] == ["synod.n=1", "synod.n=3"]
    one, three = (ran / v["folder"] for v in manifest["variants"])
    for root, n in ((one, 1), (three, 3)):
        rows = list(read_results(root / "results.jsonl").values())
        assert [r["task"] for r in rows] == [f"q{i}" for i in range(1, 10)]
        assert all(r["synod"]["n"] == n and list(r["scores"]) == SCORERS for r in rows)
        assert all(r["target"] == r["input"]["answer"] for r in rows)
        assert (root / "agents" / f"t1.s{n}").is_dir() and not (root / "agents" / f"t1.s{n + 1}").exists()
    # one child errs on one task in three; three children's vote never does
    mean = {v: sum(s["correct"]["value"] for (vv, _), s in scores_of(ran).items() if vv == v) / 9
            for v in ("synod.n=1", "synod.n=3")}
    assert mean == {"synod.n=1": pytest.approx(6 / 9), "synod.n=3": 1.0}
    # every scorer agrees on what is right; the judge's cost is its own
    for s in scores_of(ran).values():
        assert s["correct"]["value"] == s["exact"]["value"] == s["judge"]["value"]
        assert s["judge"]["cost_usd"] > 0 and s["judge"]["judge"].startswith("judge-judge-t")


def test_summary_prints_intervals_and_cost_per_correct(ran):
    out = mnemon("results", ran, "--summary", cwd=ran.parent).stdout
    head, rule, *rows = out.splitlines()
    assert head.split() == ["variant", "scorer", "n", "mean", "se", "95%", "CI", "failures",
                            "cost", "cost/correct", "judge"]
    first = rows[0].split()
    assert first[:5] == ["synod.n=1", "correct", "9", "0.667", "0.167"]
    assert first[5:7] == ["[0.354,", "0.879]"]  # Wilson's interval for 6 of 9
    cost = sum(r["cost_usd"] for r in read_rows(ran) if r["variant"] == "synod.n=1")
    assert first[8] == f"${cost:.4f}" and first[9] == f"${cost / 6:.4f}"
    assert "Wilson score interval" in out
    csv = mnemon("results", ran, "--format", "csv", cwd=ran.parent).stdout.splitlines()
    assert csv[0] == ("task,variant,status,agent,answer,score.correct,score.exact,score.judge,"
                      "score.brief")
    assert len(csv) == 19 and csv[1].startswith("q1,synod.n=1,done,t1,")
    lines = [json.loads(x) for x in
             mnemon("results", ran, cwd=ran.parent).stdout.splitlines()]
    assert {x["score.brief"] for x in lines} == {1.0}


def test_rescoring_equals_first_scoring_and_asks_no_judge_again(ran):
    before = scores_of(ran)
    judges = sorted(p for p in ran.rglob("judge-*/record.jsonl"))
    sizes = [p.stat().st_size for p in judges]
    out = mnemon("score", ran, cwd=ran.parent).stdout
    assert "scored 18 task(s)" in out
    assert scores_of(ran) == before
    assert sorted(ran.rglob("judge-*/record.jsonl")) == judges
    # a reopened judge appends its resumption and end, never a request
    for p, size in zip(judges, sizes):
        extra = p.read_bytes()[size:]
        assert b'"ProviderCall"' not in extra and b'"Assistant' not in extra


def test_compare_the_variants(ran):
    out = mnemon("compare", ran, "--json", cwd=ran.parent).stdout
    got = {c["scorer"]: c for c in json.loads(out)}
    c = got["correct"]
    assert (c["base"], c["other"], c["paired"]) == ("synod.n=1", "synod.n=3", 9)
    assert c["gained"] == ["q2", "q5", "q8"] and c["lost"] == []
    assert c["diff"]["mean"] == pytest.approx(1 / 3)
    assert c["cost_ratio"] > 1.2 and c["token_ratio"] > 1.5
    assert got["brief"]["diff"]["mean"] == 0 and got["brief"]["gained"] == []


def _rows(tmp: Path, name: str, values: list[float], cost: float, tokens: int) -> Path:
    root = tmp / name
    root.mkdir()
    with open(root / "results.jsonl", "w") as f:
        for i, v in enumerate(values):
            f.write(json.dumps({"task": f"k{i}", "status": "done", "answer": "x", "agent": f"t{i + 1}",
                                "reason": "done", "cost_usd": cost,
                                "usage": {"input_tokens": tokens, "cache_read_tokens": 0,
                                          "cache_write_tokens": 0, "output_tokens": 0},
                                "scores": {"acc": {"value": v}}}) + "\n")
        f.write(json.dumps({"task": "stopped", "status": "budget", "answer": None,
                            "cost_usd": 9.0, "usage": {}, "scores": None}) + "\n")
    return root


def test_compare_two_runs_with_known_differences(tmp_path):
    a_vals = [1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0.5, 0.25]
    b_vals = [1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0.75, 0.25]
    a = _rows(tmp_path, "a", a_vals, 0.01, 100)
    b = _rows(tmp_path, "b", b_vals, 0.03, 250)
    out = json.loads(mnemon("compare", a, b, "--json", cwd=tmp_path).stdout)
    assert len(out) == 1
    c = out[0]
    want = paired([float(x) for x in a_vals], [float(x) for x in b_vals])
    assert c["paired"] == 12 and c["diff"]["mean"] == pytest.approx(want.mean)
    assert (c["diff"]["lo"], c["diff"]["hi"]) == (pytest.approx(want.lo), pytest.approx(want.hi))
    assert c["gained"] == ["k1", "k3", "k7"] and c["lost"] == ["k4"]  # 0.5 counts as right
    assert c["cost_ratio"] == pytest.approx(3.0) and c["token_ratio"] == pytest.approx(2.5)
    text = mnemon("compare", a, b, "--plot", tmp_path / "plot.png", cwd=tmp_path).stdout
    assert "gained k1, k3, k7; lost k4" in text
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
    one = mnemon("compare", a, cwd=tmp_path, check=False)
    assert one.returncode == 2 and "compare needs two runs" in one.stderr
    assert compare([("a", []), ("b", [])]) == []


def test_results_summary_without_scores_says_so(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "results.jsonl").write_text(json.dumps({"task": "a", "status": "done"}) + "\n")
    out = mnemon("results", root / "results.jsonl", "--summary", cwd=tmp_path).stdout
    assert out.startswith("no scores")


JUDGED = """
concurrency = 1
[provider]
name = "scripted"
policy = "quiz:policy"
latency_s = {latency}
[input]
path = "quiz.jsonl"
id = "id"
prompt = "{{question}} Answer with the number."
target = "{{answer}}"
[[score]]
name = "correct"
kind = "numeric"
"""


def test_a_judge_killed_mid_run_resumes_without_re_asking_recorded_verdicts(tmp_path):
    where = tmp_path / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    (where / "plain.toml").write_text(JUDGED.format(latency=0.0))
    mnemon("run", "plain.toml", cwd=where)
    # the same tasks, now judged: slowly, one judge at a time, each request noted
    (where / "judged.toml").write_text(JUDGED.format(latency=0.4) + """
[[score]]
name = "judge"
kind = "model"
rubric = "Full marks when the answer states the expected number."
""")
    (where / "noted.py").write_text(
        "import os\nfrom quiz import policy as _p\n"
        "def policy(request, state):\n"
        "    with open(os.environ['ASKED'], 'a') as f:\n"
        "        f.write(request.meta['agent'] + '\\n')\n"
        "    return _p(request, state)\n")
    text = (where / "judged.toml").read_text().replace("quiz:policy", "noted:policy")
    (where / "judged.toml").write_text(text)
    asked = tmp_path / "asked.txt"
    env = {**os.environ, "ASKED": str(asked)}
    root = where / "plain.run"
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "score", str(root), "--job",
                             "judged.toml"], cwd=where, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    ended: set[str] = set()
    while time.monotonic() < deadline and len(ended) < 3:
        ended = {p.parent.name for p in root.glob("agents/judge-*/record.jsonl")
                 if b'"reason":"done"' in p.read_bytes()}
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert 3 <= len(ended) < 9, ended
    first = asked.read_text().split()
    assert set(ended) <= set(first)
    asked.write_text("")
    out = mnemon("score", root, "--job", "judged.toml", cwd=where, env=env).stdout
    again = asked.read_text().split()
    assert not set(again) & ended  # a recorded verdict is never asked again
    assert len(set(first) | set(again)) == 9 and len(again) == len(set(again))
    rows = list(read_results(root / "results.jsonl").values())
    assert all(r["scores"]["judge"]["value"] == r["scores"]["correct"]["value"] == 1.0
               for r in rows)
    assert "judge" in out


@pytest.mark.parametrize(("extra", "says"), [
    ('[[score]]\nname = "a"\nkind = "exact"\nabs_tol = 1\n',
     ":16: [[score]] a: a exact scorer takes no abs_tol (it takes ignore)"),
    ('[[score]]\nname = "a"\nkind = "exact"\nsharp = 1\n',
     ":16: unknown key 'sharp' in [[score]] number 1"),
    ('[[score]]\nname = "a"\nkind = "exact"\n[[score]]\nname = "a"\nkind = "includes"\n',
     ":17: two [[score]] tables are named 'a'"),
    ('[[score]]\nname = "a b"\nkind = "exact"\n', "score[0].name"),
    ('[[score]]\nname = "a"\nkind = "python"\npython = "nowhere:f"\n',
     ":16: cannot import 'nowhere'"),
    ('[[score]]\nname = "a"\nkind = "model"\nrubric = "r"\nrole = "ghost"\n',
     ":17: [[score]] a: role 'ghost' is not one of the job's roles"),
    ('[variants]\nsynod.n = 3\n', "[variants] synod.n takes a list of values"),
    ('[variants]\nsynod.n = [1, 99]\n', "[variants] synod.n=99:"),
])
def test_a_job_that_cannot_score_is_refused_in_one_line(tmp_path, extra, says):
    where = tmp_path / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    base = JUDGED.format(latency=0.0).lstrip("\n").replace('[[score]]\nname = "correct"\n'
                                                           'kind = "numeric"\n', "")
    base += '[synod]\nn = 1\n'
    (where / "bad.toml").write_text(base + extra)
    done = mnemon("run", "bad.toml", cwd=where, check=False)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (where / "bad.run").exists()


def test_score_refuses_what_it_cannot_score(tmp_path):
    where = tmp_path / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    (where / "plain.toml").write_text(JUDGED.format(latency=0.0))
    out = mnemon("run", "plain.toml", cwd=where).stdout
    assert "scorer" in out and "correct  9  1.000" in out  # `mnemon run` prints the summary
    root = where / "plain.run"
    (where / "none.toml").write_text(JUDGED.format(latency=0.0).split("[[score]]")[0])
    (where / "other.toml").write_text(JUDGED.format(latency=0.0).replace(
        'id = "id"', 'id = "question"'))
    for job, says in (("none.toml", "has no [[score]] tables"),
                      ("other.toml", "is not the job of")):
        done = mnemon("score", root, "--job", job, cwd=where, check=False)
        assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1
    done = mnemon("score", tmp_path / "nowhere", cwd=where, check=False)
    assert done.returncode == 2 and "is not a run root" in done.stderr
    (root / "results.jsonl").rename(root / "kept.jsonl")
    done = mnemon("score", root, cwd=where, check=False)
    assert done.returncode == 2 and "has no results.jsonl" in done.stderr


def test_a_variants_manifest_names_folders_never_paths(tmp_path):
    from mnemon.orchestrator.jobs.variants import variant_roots

    (tmp_path / "variants.json").write_text(json.dumps({"format": 1, "variants": [
        {"name": "a", "folder": "1-a"}, {"name": "up", "folder": ".."},
        {"name": "abs", "folder": "/etc"}, {"name": "dots", "folder": "2-../x"}]}))
    assert variant_roots(tmp_path) == [("a", tmp_path / "1-a")]
