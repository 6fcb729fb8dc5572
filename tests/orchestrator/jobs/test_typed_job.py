"""A job with typed answers: the typed capitals example (docs/examples/capitals/
capitals-typed.toml), every results row's ``output`` valid against its schema, ``mnemon
results`` as CSV with the output's fields as columns, a field-wise synod vote with a tie in
the results row, and output types refused before anything runs."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest

from mnemon.orchestrator.cli import main

from .kit import records, results

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "capitals"
SCHEMA = json.loads((EXAMPLE / "capital.schema.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_atlas():
    sys.modules.pop("atlas", None)
    yield
    sys.modules.pop("atlas", None)


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "capitals"
    shutil.copytree(EXAMPLE, folder)
    return folder


def test_the_typed_capitals_job(tmp_path, capsys):
    root = tmp_path / "run"
    assert main(["run", str(EXAMPLE / "capitals-typed.toml"), "--run-root", str(root),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["tasks"], summary["done"]) == (5, 5)
    rows = results(root / "results.jsonl")
    assert len(rows) == 5
    for r in rows:
        jsonschema.validate(r["output"], SCHEMA)
        assert json.loads(r["answer"]) == r["output"]
        assert r["synod"]["vote"]["ties"] == []
        assert r["synod"]["vote"]["fields"]["capital"]["counts"][r["output"]["capital"].lower()] \
            == 2
    assert {r["task"]: r["output"]["capital"] for r in rows} == {
        "fr": "Paris", "jp": "Tokyo", "ke": "Nairobi", "pe": "Lima", "nz": "Wellington"}
    # each task's first answer missed a field: one retry, recorded as harness steering
    for i in range(1, 6):
        log = records(root / "agents" / f"t{i}" / "record.jsonl")
        steer = [x for x in log if x["t"] == "Steering"]
        assert len(steer) == 1 and "$.continent: is required but missing" in steer[0]["text"]
        assert log[-1]["t"] == "SessionEnded" and log[-1]["output"]["continent"]
        assert log[0]["output_type"]["schema"] == SCHEMA
    assert main(["verify", str(root)]) == 0
    capsys.readouterr()

    assert main(["results", str(root), "--format", "csv"]) == 0
    table = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert table[0] == ["task", "status", "agent", "country", "capital", "continent", "coastal",
                        "sources"]
    body = {row[0]: dict(zip(table[0], row)) for row in table[1:]}
    assert len(body) == 5
    assert body["pe"] == {"task": "pe", "status": "done", "agent": "t4", "country": "Peru",
                          "capital": "Lima", "continent": "South America", "coastal": "true",
                          "sources": '["atlas"]'}

    assert main(["results", str(root)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["task"] for x in lines] == ["fr", "jp", "ke", "pe", "nz"]
    assert lines[0]["sources"] == ["atlas"] and lines[0]["capital"] == "Paris"


def test_a_typed_synod_tie_is_in_the_results_row(tmp_path, capsys):
    folder = _copy(tmp_path)
    job = folder / "capitals-typed.toml"
    text = job.read_text().replace("n = 3", "n = 2").replace(
        'stances = ["", "", "Answer as a contrarian."]', 'stances = ["", "Answer as a contrarian."]')
    text = text.replace('output = "capital.schema.json"  # or an import path: output = "atlas:Capital"',
                        'output = "atlas:Capital"')
    job.write_text(text)
    root = tmp_path / "run"
    assert main(["run", str(job), "--run-root", str(root), "--json"]) == 0
    capsys.readouterr()
    rows = {r["task"]: r for r in results(root / "results.jsonl")}
    fr = rows["fr"]
    # the contrarian names another city, whose coast the atlas does not know (null: the
    # Struct's coastal is optional and nullable): two fields tie, one vote each
    assert fr["status"] == "done" and fr["reason"] == "tie: capital, coastal"
    vote = fr["synod"]["vote"]
    assert vote["ties"] == ["capital", "coastal"]
    assert vote["fields"]["coastal"]["tied"] == [False, None]
    assert vote["fields"]["capital"]["tied"] == ["Paris", "Not Paris"]
    assert vote["fields"]["capital"]["winner"] is None
    assert vote["fields"]["country"]["winner"] == "France"
    assert fr["output"]["capital"] == "Paris"  # the tied value given first, reported as tied
    assert records(root / "agents" / "t1" / "record.jsonl")[0]["output_type"]["name"] == "Capital"


@pytest.mark.parametrize(("line", "says"), [
    ('output = "missing.json"', "No such file"),
    ('output = "atlas:lookup"', "is not a type"),
    ('output = "atlas:CAPITALS"', "keyword 'France' is not supported"),
    ('output = "nowhere:Type"', "cannot import 'nowhere'"),
])
def test_a_job_output_type_that_cannot_be_used_is_refused_first(tmp_path, capsys, line, says):
    folder = _copy(tmp_path)
    job = folder / "capitals-typed.toml"
    job.write_text(job.read_text().replace(
        'output = "capital.schema.json"  # or an import path: output = "atlas:Capital"', line))
    assert main(["run", str(job), "--run-root", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "capitals-typed.toml:" in err, err
    assert "[agent] output" in err
    assert not (tmp_path / "run").exists()


def test_an_unknown_key_beside_output_is_still_refused(tmp_path, capsys):
    folder = _copy(tmp_path)
    job = folder / "capitals-typed.toml"
    job.write_text(job.read_text().replace("output_retries = 2", "output_retry = 2"))
    assert main(["run", str(job), "--run-root", str(tmp_path / "run")]) == 2
    assert "unknown key 'output_retry' in [agent]" in capsys.readouterr().err


def test_a_job_output_type_nothing_fits_is_refused_first(tmp_path, capsys):
    """A schema whose bounds contradict each other: the job is refused before anything runs,
    in one line naming the job's line and the schema path."""
    folder = _copy(tmp_path)
    (folder / "bad.schema.json").write_text(json.dumps(
        {"type": "object", "properties": {"capital": {"type": "string", "minLength": 5,
                                                      "maxLength": 2}}}))
    job = folder / "capitals-typed.toml"
    job.write_text(job.read_text().replace(
        'output = "capital.schema.json"  # or an import path: output = "atlas:Capital"',
        'output = "bad.schema.json"'))
    assert main(["run", str(job), "--run-root", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "capitals-typed.toml:" in err, err
    assert "#/properties/capital: minLength 5 is above maxLength 2" in err
    assert not (tmp_path / "run").exists()
