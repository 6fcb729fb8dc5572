"""The roles table judged whole before anything runs: unknown keys, unknown ``may_start``
names, a mnemon role that would change its caller's prefix, bad values — each one line naming
the source and the role; a cycle of handoffs refused; a role's policy only ever narrows its parent's."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from mnemon.orchestrator.policy import combine, parse_policy
from mnemon.orchestrator.roles.load import as_roles, load_roles, roles_from
from mnemon.orchestrator.roles.spec import Roles, RolesError, parse_roles
from mnemon.providers.typed import OutputType

TEAM = {
    "lead": {"description": "plans", "system": "You lead.", "model": "m-lead",
             "may_start": ["researcher", "reviewer"]},
    "researcher": {"description": "finds sources", "tools": ["lookup"], "may_start": ["reviewer"],
                   "max_depth": 2},
    "reviewer": {"tools": ["read_*"], "policy": {"default": "allow", "rule": [
        {"tool": "write_*", "action": "deny", "reason": "reviewers do not write"}]},
        "budget": {"tokens": 5000}},
}


def test_a_team_parses():
    roles = parse_roles(TEAM, "team.toml", root="lead")
    assert roles.root == "lead" and roles.names() == ["lead", "researcher", "reviewer"]
    assert roles["researcher"].may_start == ("reviewer",)
    assert roles["reviewer"].may_start == ()
    assert roles["researcher"].tools == ("lookup",) and roles["lead"].tools is None
    assert roles["reviewer"].budget_tokens == 5000 and roles["reviewer"].kind == "fresh"
    assert roles["reviewer"].policy.decide("write_note", {}).action == "deny"


@pytest.mark.parametrize("change, message", [
    ({"lead": {"modle": "x"}}, "team.toml: role lead: unknown key 'modle' (known: "),
    ({"lead": {"may_start": ["writer"]}},
     "team.toml: role lead: may_start names 'writer', which is not a role (roles: lead, "
     "researcher, reviewer)"),
    ({"lead": {"kind": "forked"}}, "team.toml: role lead: kind must be fresh or mnemon"),
    ({"reviewer": {"may_start": ["researcher"]}}, "team.toml: role researcher: may_start makes a "
     "cycle of handoffs (researcher → reviewer → researcher); delegation runs one way"),
    ({"researcher": {"may_start": ["researcher"]}}, "team.toml: role researcher: may_start makes "
     "a cycle of handoffs (researcher → researcher)"),
    ({"lead": {"provider": "gemini"}}, "team.toml: role lead: provider must be one of scripted, "
     "anthropic, openai, openai-responses, not 'gemini'"),
    ({"researcher": {"kind": "mnemon", "model": "x"}},
     "team.toml: role researcher: a mnemon role begins with its caller's context"),
    ({"lead": {"max_depth": -1}}, "team.toml: role lead: max_depth must be a whole number ≥ 0"),
    ({"lead": {"budget": {"dollars": 1}}}, "team.toml: role lead: budget is a table of tokens"),
    ({"lead": {"keep": 2}}, "team.toml: role lead: keep must be 'auto' or a share"),
    ({"lead": {"policy": {"default": "maybe"}}},
     "team.toml: role lead policy: default must be allow, deny, ask or ask_parent"),
    ({"lead": {"policy": {"rule": [{"tool": "x", "action": "deny", "when": {"p": "(a|aa)+$"}}]}}},
     "can run away"),
    ({"lead": {"tools": "lookup"}}, "team.toml: role lead: tools is a list"),
    ({"ask me": {}}, "team.toml: role 'ask me': a role's name is a letter"),
    ({"lead": {"output": "out.json"}}, "team.toml: role lead: output: 'out.json' cannot be "
     "resolved here"),
])
def test_a_bad_table_is_one_line_naming_the_source_and_role(change, message):
    data = {k: dict(v) for k, v in TEAM.items()}
    for name, body in change.items():
        data[name] = {**data.get(name, {}), **body}
    with pytest.raises(RolesError) as e:
        parse_roles(data, "team.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_root_role_is_refused():
    with pytest.raises(RolesError, match="the root's role 'boss' is not a role"):
        parse_roles(TEAM, "team.toml", root="boss")
    with pytest.raises(RolesError, match="the root's role 'boss' is not a role"):
        parse_roles(TEAM, "team.toml").with_root("boss")
    with pytest.raises(RolesError, match="there are no roles"):
        as_roles(None, root="lead")


def test_a_roles_file_resolves_its_references_beside_it(tmp_path: Path):
    (tmp_path / "verdict.json").write_text('{"title": "Verdict", "type": "object", '
                                           '"properties": {"ok": {"type": "boolean"}}, '
                                           '"required": ["ok"], "additionalProperties": false}')
    (tmp_path / "strict.toml").write_text('default = "deny"\n')
    (tmp_path / "team_tools.py").write_text(
        "def lookup(q: str) -> str:\n    '''Look a thing up.'''\n    return q\n")
    (tmp_path / "team.toml").write_text(
        'role = "lead"\n'
        '[roles.lead]\nmay_start = ["reviewer"]\ntools = ["team_tools:lookup"]\n'
        '[roles.reviewer]\noutput = "verdict.json"\npolicy = "strict.toml"\n')
    roles = load_roles(tmp_path / "team.toml")
    assert roles.root == "lead"
    assert roles["reviewer"].output.name == "Verdict"
    assert roles["reviewer"].policy.default == "deny"
    assert [t.name for t in roles["lead"].user_tools] == ["lookup"]
    assert roles["lead"].tools == ("lookup",)
    assert load_roles(tmp_path / "team.toml", root="reviewer").root == "reviewer"


@pytest.mark.parametrize("text, message", [
    ("[roles.lead\n", "not valid TOML"),
    ("[other]\n", "no [roles.NAME] table"),
    ('[roles.lead]\noutput = "missing.json"\n', "role lead: output: "),
    ('[roles.lead]\npolicy = "missing.toml"\n', "role lead: policy: policy "),
    ('[roles.lead]\ntools = ["nosuchmodule_xyz:f"]\n', "role lead: tools: cannot import"),
    ('role = "x"\n[roles.lead]\n', "the root's role 'x' is not a role"),
    ('rolez = "x"\n[roles.lead]\n', "unknown key 'rolez'"),
])
def test_a_bad_roles_file_names_the_file(tmp_path: Path, text, message):
    p = tmp_path / "team.toml"
    p.write_text(text)
    with pytest.raises(RolesError) as e:
        load_roles(p)
    assert str(p) in str(e.value) and message in str(e.value) and "\n" not in str(e.value)


def test_an_output_openai_cannot_ask_for_strictly_is_refused_for_an_openai_role(tmp_path):
    free = {"type": "object", "properties": {"tags": {"type": "object",
                                                      "additionalProperties": {"type": "string"}}},
            "required": ["tags"], "additionalProperties": False}
    with pytest.raises(RolesError, match="t: role r: output: .*strict mode cannot express"):
        roles_from({"r": {"provider": "openai", "output": OutputType(free)}}, "t", base=tmp_path)
    roles_from({"r": {"output": OutputType(free)}}, "t", base=tmp_path, provider="anthropic")


# --------------------------------------------------------------------------- narrowing

_ACTIONS = st.sampled_from(["allow", "ask", "deny"])
_TOOLS = ["read_a", "read_b", "write_a", "ask_reviewer", "agents_start"]
_RULES = st.lists(st.fixed_dictionaries({"tool": st.sampled_from(["read_*", "write_*", "*_a",
                                                                   "ask_*", "agents_start"]),
                                         "action": _ACTIONS}), max_size=4)
_RANK = {"allow": 0, "ask": 1, "deny": 2}


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=st.one_of(st.none(), st.tuples(_ACTIONS, _RULES)),
       chain=st.lists(st.one_of(st.none(), st.tuples(_ACTIONS, _RULES)), min_size=1,
                      max_size=4))
def test_a_role_never_widens_its_parents_policy(run, chain):
    """Down any chain of roles (each with its own policy or none), an agent's effective policy
    is at least as strict as its parent's on every call, whatever its own rules say."""
    def pol(x, n):
        return None if x is None else parse_policy({"default": x[0], "rule": x[1]}, f"p{n}")

    effective = pol(run, 0)
    for i, own in enumerate(chain, 1):
        role = parse_roles({"r": {"policy": {"default": own[0], "rule": own[1]}}} if own else
                           {"r": {}}, "t")["r"]
        child = combine(effective, role.policy)
        for tool in _TOOLS:
            if effective is None:
                continue
            assert _RANK[child.decide(tool, {}).action] >= _RANK[effective.decide(tool, {}).action]
        effective = child


def test_roles_take_a_role_object_from_python():
    roles = parse_roles(TEAM, "t")
    again = Roles({"lead": roles["lead"], "researcher": roles["researcher"],
                   "reviewer": roles["reviewer"]}, "lead")
    assert again.root == "lead" and as_roles(again) is again
    assert as_roles(TEAM, root="lead").root == "lead"


def test_a_role_naming_no_tool_of_the_run_is_refused():
    from mnemon.orchestrator.roles.spec import check_tools

    roles = parse_roles({"r": {"tools": ["lookup", "fs__read_*", "web__get", "read_?"]}}, "t")
    check_tools(roles, frozenset({"lookup"}))  # globs and MCP names are left to run time
    with pytest.raises(RolesError, match=r"t: role r: tools names 'lookup', which is not a "
                                         r"tool of the run \(tools: search\)"):
        check_tools(roles, frozenset({"search"}))


def test_a_roles_provider_needs_its_key_unless_it_is_a_server_of_ones_own():
    from mnemon.orchestrator.roles.book import check_providers

    roles = parse_roles({"a": {"provider": "anthropic"},
                         "b": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"},
                         "c": {"provider": "anthropic", "base_url": "http://127.0.0.1:9"}}, "t")
    with pytest.raises(RolesError, match="t: role a: ANTHROPIC_API_KEY is not set"):
        check_providers(roles, "scripted", env={})
    check_providers(roles, "anthropic", env={"ANTHROPIC_API_KEY": "k"})
    only_b = parse_roles({"b": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"}}, "t")
    check_providers(only_b, "scripted", env={})
    only_c = parse_roles({"c": {"provider": "anthropic", "base_url": "http://127.0.0.1:9"}}, "t")
    with pytest.raises(RolesError, match="role c: ANTHROPIC_API_KEY"):
        check_providers(only_c, "scripted", env={})
