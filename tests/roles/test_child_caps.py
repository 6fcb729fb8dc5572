"""Default child caps from a role table and from a job's ``[agent]``: ``child_budget_usd``,
``child_budget_tokens``, ``child_max_turns`` give a child its caps when the agent that starts
it gives none (an explicit cap still wins), and a value that cannot be one is refused naming
the role or the line."""

from __future__ import annotations

import pytest

from mnemon.orchestrator.jobs.build import settings_for
from mnemon.orchestrator.jobs.spec import JobError, load_job
from mnemon.orchestrator.roles.spec import RolesError, parse_roles
from mnemon.orchestrator.settings import Settings

from .test_delegation import _records, _run, team


async def test_a_roles_child_caps_are_given_to_the_children_its_agents_start(tmp_path):
    roles = team(lead={"child_budget_usd": 0.4, "child_budget_tokens": 80_000,
                       "child_max_turns": 3})
    root, lead, _model, _sup = await _run(tmp_path, [
        ("agents_start", {"task": "find it", "role": "researcher"}),
        ("agents_start", {"task": "find it too", "role": "researcher", "budget_usd": 0.1}),
        ("agents_wait", {})], roles=roles)
    assert lead.reason == "done"
    kids = sorted(lead.children)
    assert [_records(root, k)[0]["budget"] for k in kids] == [
        {"usd": 0.4, "tokens": 80_000, "max_turns": 3},
        {"usd": 0.1, "tokens": 80_000, "max_turns": 3}]
    assert all(lead.children[k].reason == "done" for k in kids)


async def test_a_roles_child_caps_replace_the_runs(tmp_path):
    roles = team(lead={"child_max_turns": 2})
    root, lead, _model, _sup = await _run(
        tmp_path, [("agents_start", {"task": "find it", "role": "researcher"}),
                   ("agents_wait", {})],
        roles=roles, settings=Settings(child_max_turns=5, child_budget_tokens=70_000))
    (kid,) = lead.children
    assert _records(root, kid)[0]["budget"] == {"tokens": 70_000, "max_turns": 2}


@pytest.mark.parametrize("key, value, words", [
    ("child_budget_usd", 0, "child_budget_usd must be a number of dollars > 0"),
    ("child_budget_usd", "1", "child_budget_usd must be a number of dollars > 0"),
    ("child_budget_usd", True, "child_budget_usd must be a number of dollars > 0"),
    ("child_budget_tokens", 0, "child_budget_tokens must be a whole number ≥ 1"),
    ("child_max_turns", 2.5, "child_max_turns must be a whole number ≥ 1"),
])
def test_a_bad_child_cap_in_a_role_is_refused_naming_it(key, value, words):
    with pytest.raises(RolesError) as e:
        parse_roles({"lead": {key: value}}, "team.toml")
    assert str(e.value).startswith("team.toml: role lead: ") and words in str(e.value)


def test_a_roles_child_caps_parse(tmp_path):
    r = parse_roles({"lead": {"child_budget_usd": 1, "child_budget_tokens": 5,
                              "child_max_turns": 7}}, "team.toml")["lead"]
    assert (r.child_budget_usd, r.child_budget_tokens, r.child_max_turns) == (1.0, 5, 7)
    assert isinstance(r.child_budget_usd, float)


JOB = '[agent]\n{extra}\n[[tasks]]\nid = "a"\nprompt = "p"\n'


def test_a_jobs_agent_table_sets_the_runs_child_caps(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(JOB.format(extra="child_budget_usd = 0.25\nchild_budget_tokens = 9000\n"
                                     "child_max_turns = 6\n"))
    s = settings_for(load_job(path))
    assert (s.child_budget_usd, s.child_budget_tokens, s.child_max_turns) == (0.25, 9000, 6)
    path.write_text(JOB.format(extra=""))
    s = settings_for(load_job(path))
    assert (s.child_budget_usd, s.child_budget_tokens, s.child_max_turns) == (None, None, None)


@pytest.mark.parametrize("extra, key", [("child_budget_usd = 0", "child_budget_usd"),
                                        ("child_max_turns = 0", "child_max_turns"),
                                        ("child_budget_tokens = \"many\"", "child_budget_tokens")])
def test_a_bad_child_cap_in_a_job_is_refused_naming_its_line(tmp_path, extra, key):
    path = tmp_path / "job.toml"
    path.write_text(JOB.format(extra=extra))
    with pytest.raises(JobError) as e:
        load_job(path)
    assert str(e.value).startswith(f"{path}:2:") and key in str(e.value)
