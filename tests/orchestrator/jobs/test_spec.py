"""The job file: unknown keys, wrong types and template errors are refused naming the key (or
column) and the line, with exit 2, before any agent starts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.jobs import JobError, load_job, load_tasks

from .kit import write_job

GOOD = """\
concurrency = 2
[provider]
name = "scripted"
[agent]
system = "You answer."
"""


def refused(tmp_path, capsys, body: str, *, tasks: int | None = 1) -> str:
    job = write_job(tmp_path / "j", body, tasks=tasks)
    code = main(["run", str(job), "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists(), "nothing is written before the job is valid"
    return err


@pytest.mark.parametrize(("body", "key", "line"), [
    (GOOD.replace("concurrency = 2", "concurency = 2"), "'concurency' in the top level", 1),
    (GOOD.replace('system = "You answer."', 'sytem = "You answer."'), "'sytem' in [agent]", 5),
    (GOOD + "[budget]\nusd = 1.0\nper_task = 3\n", "'per_task' in [budget]", 8),
    (GOOD + "[agnet]\nx = 1\n", "'agnet' in the top level", 6),
    (GOOD + "[synod]\nn = 3\nreduse = \"vote\"\n", "'reduse' in [synod]", 8),
])
def test_an_unknown_key_is_named_with_its_line(tmp_path, capsys, body, key, line):
    err = refused(tmp_path, capsys, body)
    assert f"job.toml:{line}: unknown key {key}" in err


def test_an_unknown_key_in_the_second_inline_task(tmp_path, capsys):
    body = GOOD + ('\n[[tasks]]\nid = "a"\nprompt = "x"\n'
                   '\n[[tasks]]\nid = "b"\npromt = "y"\n')
    err = refused(tmp_path, capsys, body, tasks=None)
    assert "job.toml:13: unknown key 'promt' in [[tasks]] number 2" in err


def test_a_wrong_type_is_named_with_its_line(tmp_path, capsys):
    err = refused(tmp_path, capsys, GOOD.replace("concurrency = 2", 'concurrency = "two"'))
    assert "job.toml:1: concurrency: Expected `int`, got `str`" in err
    err = refused(tmp_path, capsys, GOOD.replace('name = "scripted"', 'name = "mistral"'))
    assert "job.toml:3: provider.name: Invalid enum value 'mistral'" in err


def test_a_missing_column_in_jsonl_names_the_column_and_row(tmp_path, capsys):
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "rows.jsonl").write_text('{"q": "one"}\n\n{"question": "two"}\n')
    body = GOOD + '[input]\npath = "rows.jsonl"\nprompt = "Answer: {q}"\n'
    err = refused(tmp_path, capsys, body, tasks=None)
    assert "rows.jsonl:3: no column 'q'" in err and "question" in err


def test_a_missing_column_in_csv_names_the_column_and_row(tmp_path, capsys):
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "rows.csv").write_text("id,city\n1,Paris\n2,Lima\n")
    body = GOOD + '[input]\npath = "rows.csv"\nid = "id"\nprompt = "Where is {country}?"\n'
    err = refused(tmp_path, capsys, body, tasks=None)
    assert "rows.csv:2: no column 'country' (the row has: city, id)" in err


def test_a_bad_template_and_duplicate_ids_are_refused(tmp_path, capsys):
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "rows.jsonl").write_text('{"id": "x", "q": 1}\n{"id": "x", "q": 2}\n')
    err = refused(tmp_path, capsys, GOOD + '[input]\npath = "rows.jsonl"\nprompt = "{q!r}"\n',
                  tasks=None)
    assert "plain {column}" in err
    err = refused(tmp_path, capsys, GOOD + '[input]\npath = "rows.jsonl"\nid = "id"\n'
                  'prompt = "{q}"\n', tasks=None)
    assert "rows.jsonl:2: task id 'x' is not unique" in err


def test_no_tasks_and_a_bad_import_path_are_refused(tmp_path, capsys):
    err = refused(tmp_path, capsys, GOOD, tasks=None)
    assert "no tasks" in err
    err = refused(tmp_path, capsys, GOOD + 'tools = ["job_policy:nope"]\n')
    assert "job.toml:6: 'job_policy' has no 'nope'" in err


def test_a_valid_job_fills_templates_from_rows(tmp_path):
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "rows.csv").write_text('id,city\n7,"Paris, France"\n')
    job = load_job(write_job(folder, GOOD + '[input]\npath = "rows.csv"\nid = "id"\n'
                             'prompt = "Where is {city}? {{braces}}"\n'
                             '[synod]\nn = 2\nquestion = "Is it {city}?"\n'))
    [task] = load_tasks(job)
    assert (task.id, task.agent, task.prompt) == ("7", "t1", "Where is Paris, France? {braces}")
    assert task.question == "Is it Paris, France?"
    assert task.row == {"id": "7", "city": "Paris, France"}
    with pytest.raises(JobError, match="job.toml: not valid TOML at line 1, column 5: "):
        load_job(write_job(tmp_path / "bad", "x = = 1"))


_TABLES = {  # a valid body per table, one key per line
    None: ["concurrency = 2", "retries = 1"],
    "provider": ['name = "scripted"', "latency_s = 0.0"],
    "agent": ['system = "s"', "max_turns = 3"],
    "budget": ["usd = 1.0", "task_tokens = 100"],
    "synod": ["n = 2", 'reduce = "vote"'],
}


@settings(max_examples=60, deadline=None)
@given(order=st.permutations([t for t in _TABLES if t is not None]),
       where=st.sampled_from(list(_TABLES)), at=st.integers(0, 2),
       key=st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True),
       blanks=st.lists(st.integers(0, 2), min_size=5, max_size=5))
def test_any_unknown_key_is_found_on_its_line(order, where, at, key, blanks):
    from mnemon.orchestrator.jobs.spec import JobSpec, _explain

    import msgspec
    import tomllib

    known = set(JobSpec.__struct_fields__) | {f for t in ("provider", "agent", "budget", "synod")
                                                 for f in _struct(t).__struct_fields__}
    if key in known:
        return
    lines: list[str] = []
    target = None
    for n, table in enumerate([None, *order]):
        lines += [""] * blanks[n]
        if table is not None:
            lines.append(f"[{table}]")
        body = list(_TABLES[table])
        if table == where:
            body.insert(min(at, len(body)), f"{key} = 1")
        for line in body:
            lines.append(line)
            if line == f"{key} = 1":
                target = len(lines)
    lines += ['[[tasks]]', 'id = "a"', 'prompt = "p"']
    text = "\n".join(lines) + "\n"
    data = tomllib.loads(text)
    try:
        msgspec.convert(data, JobSpec)
    except msgspec.ValidationError as e:
        message = _explain("job.toml", text, str(e))
    else:
        raise AssertionError("an unknown key must be refused")
    table = "the top level" if where is None else f"[{where}]"
    assert message == f"job.toml:{target}: unknown key {key!r} in {table}"


def _struct(table: str):
    from mnemon.orchestrator.jobs import spec

    return {"provider": spec.ProviderSpec, "agent": spec.AgentSpec, "budget": spec.BudgetSpec,
            "synod": spec.SynodSpec}[table]


def test_keep_is_auto_unless_the_job_names_a_share(tmp_path):
    from mnemon.orchestrator.jobs.build import settings_for
    from mnemon.orchestrator.jobs.spec import JobError, load_job

    base = '[[tasks]]\nid = "a"\nprompt = "p"\n'
    (tmp_path / "a.toml").write_text(base)
    assert settings_for(load_job(tmp_path / "a.toml")).keep == "auto"
    (tmp_path / "b.toml").write_text('[agent]\nkeep = 0.3\nkeep_floor_tokens = 100\n' + base)
    s = settings_for(load_job(tmp_path / "b.toml"))
    assert s.keep == 0.3 and s.keep_floor_tokens == 100
    (tmp_path / "c.toml").write_text('[agent]\nkeep = "most"\n' + base)
    import pytest

    with pytest.raises(JobError, match="keep"):
        load_job(tmp_path / "c.toml")
