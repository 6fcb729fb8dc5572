"""Policy rules: loading and judging them, first match wins, runaway patterns refused at load,
and children only narrow (property-tested over generated rule sets and calls)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from mnemon.orchestrator.policy import (PolicyError, ToolPolicy, combine, load_policy,
                                        parse_policy, strictest)

RANK = {"allow": 0, "ask": 1, "deny": 2}

EXAMPLE = """
default = "allow"
ask_timeout = 30
[[rule]]
tool = "fs__write_*"
when = { path = "^/etc/" }
action = "deny"
reason = "no writes under /etc"
[[rule]]
tool = "fs__write_*"
action = "ask"
reason = "a write"
[[rule]]
tool = "agents_start"
action = "deny"
reason = "no children here"
"""


def test_the_first_matching_rule_decides(tmp_path):
    p = tmp_path / "policy.toml"
    p.write_text(EXAMPLE)
    pol = load_policy(p)
    assert pol.ask_timeout_s == 30.0
    v = pol.decide("fs__write_file", {"path": "/etc/passwd", "text": "x"})
    assert (v.action, v.reason, v.rule) == ("deny", "no writes under /etc", f"{p} rule 1")
    v = pol.decide("fs__write_file", {"path": "/tmp/x"})
    assert (v.action, v.rule) == ("ask", f"{p} rule 2")
    v = pol.decide("fs__read_file", {"path": "/etc/passwd"})
    assert (v.action, v.rule) == ("allow", f"{p} default")
    assert pol.decide("agents_start", {"task": "t"}).action == "deny"  # built-ins are tools too
    assert "no children here" in pol.decide("agents_start", {}).text("agents_start")


def test_when_needs_every_argument_to_match_and_reads_non_strings_as_json():
    pol = parse_policy({"default": "deny", "rule": [
        {"tool": "add", "when": {"a": "^1$", "b": "^[0-9]$"}, "action": "allow"}]}, "p")
    assert pol.decide("add", {"a": 1, "b": 2}).action == "allow"
    assert pol.decide("add", {"a": 1, "b": 22}).action == "deny"
    assert pol.decide("add", {"a": 1}).action == "deny"  # a missing argument does not match
    assert pol.decide("add", "cut off {").action == "deny"


@pytest.mark.parametrize("data, says", [
    ({"default": "maybe"}, "default must be allow, deny, ask or ask_parent"),
    ({"rules": []}, "unknown key 'rules'"),
    ({"rule": [{"tool": "x", "action": "allow"}, {"tool": "y", "action": "perhaps"}]},
     "p rule 2: action must be allow, deny, ask or ask_parent"),
    ({"rule": [{"action": "deny"}]}, "p rule 1: tool must be a glob"),
    ({"rule": [{"tool": "x", "action": "deny", "if": {}}]}, "p rule 1: unknown key 'if'"),
    ({"rule": [{"tool": "x", "action": "deny", "when": {"a": "("}}]},
     "p rule 1: when.a: not a valid regex"),
    ({"rule": [{"tool": "x", "action": "deny", "when": {"a": 3}}]}, "when.a must be a regex"),
    ({"ask_timeout": -1}, "ask_timeout must be a positive number"),
    ({"rule": {"tool": "x"}}, "rules are [[rule]] tables"),
])
def test_a_malformed_policy_is_refused_naming_the_rule(data, says):
    with pytest.raises(PolicyError) as e:
        parse_policy(data, "p")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_file_that_is_not_toml_is_refused_naming_it(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("default = \n")
    with pytest.raises(PolicyError, match=f"policy {p}: not valid TOML"):
        load_policy(p)
    with pytest.raises(PolicyError, match="cannot be read"):
        load_policy(tmp_path / "missing.toml")


@pytest.mark.parametrize("pattern", [r"(a|aa)+$", r"^(\w|\w\w)+$", r"(x|xx)+y"])
def test_a_pattern_that_would_run_away_is_refused_at_load(pattern):
    t = time.perf_counter()
    with pytest.raises(PolicyError, match="can run away"):
        parse_policy({"rule": [{"tool": "*", "action": "deny", "when": {"cmd": pattern}}]}, "p")
    assert time.perf_counter() - t < 5
    with pytest.raises(PolicyError, match="at most 1000 characters"):
        parse_policy({"rule": [{"tool": "*", "action": "deny", "when": {"c": "a" * 1001}}]}, "p")


def test_a_match_that_runs_out_of_time_fails_closed(monkeypatch):
    """A pattern the load check lets through but that is slow on one real input (polynomial,
    not nested): the call is denied, naming the rule — never allowed by a timeout."""
    from mnemon.orchestrator import policy as P

    pol = parse_policy({"default": "allow", "rule": [
        {"tool": "bash", "when": {"command": r"\d+\d+\d+\d+x"}, "action": "allow"}]}, "p")
    monkeypatch.setattr(P, "MATCH_TIMEOUT_S", 0.01)
    v = pol.decide("bash", {"command": "x" + "1" * 5000 + "!"})
    assert v.action == "deny" and "could not judge this call in time" in v.reason
    assert v.rule == "p rule 1"


# --------------------------------------------------------------------------- children narrow

TOOLS = ["fs__write_file", "fs__read_file", "bash", "agents_start", "transcript_grep"]
GLOBS = ["*", "fs__*", "fs__write_*", "bash", "agents_*", "transcript_grep", "nothing"]
ARGS = ["/etc/x", "/tmp/y", "rm -rf /", "ls"]

rules_st = st.lists(st.fixed_dictionaries(
    {"tool": st.sampled_from(GLOBS), "action": st.sampled_from(["allow", "ask", "deny"])},
    optional={"when": st.fixed_dictionaries({"arg": st.sampled_from(["^/etc", "rm", "^l", "y$"])}),
              "reason": st.text(max_size=5)}), max_size=5)
policy_st = st.builds(lambda d, r, n: parse_policy({"default": d, "rule": r}, n),
                      st.sampled_from(["allow", "ask", "deny"]), rules_st,
                      st.sampled_from(["parent", "child", "grandchild"]))
call_st = st.tuples(st.sampled_from(TOOLS), st.fixed_dictionaries({"arg": st.sampled_from(ARGS)}))


@hsettings(max_examples=300, deadline=None)
@given(parent=policy_st, child=st.none() | policy_st, grandchild=st.none() | policy_st,
       call=call_st)
def test_a_child_is_never_more_permitted_than_its_parent(parent, child, grandchild, call):
    tool, args = call
    eff_child = combine(parent, child)
    eff_grand = combine(eff_child, grandchild)
    p, c, g = (parent.decide(tool, args), eff_child.decide(tool, args),
               eff_grand.decide(tool, args))
    assert RANK[c.action] >= RANK[p.action]
    assert RANK[g.action] >= RANK[c.action]
    if child is not None:
        assert RANK[c.action] >= RANK[child.own(tool, args).action]
        # the combination is exactly the stricter of the two
        assert RANK[c.action] == max(RANK[p.action], RANK[child.own(tool, args).action])
    if p.action != "allow":
        assert g.action != "allow"  # a call the parent denies or asks is never allowed below


@given(parent=policy_st, call=call_st)
def test_combining_a_policy_with_itself_or_nothing_changes_nothing(parent, call):
    tool, args = call
    for eff in (combine(parent, parent), combine(parent, None), combine(None, parent)):
        assert eff.decide(tool, args) == parent.decide(tool, args)


def test_strictest_keeps_the_outermost_among_equals():
    a = ToolPolicy("deny", source="outer")
    b = ToolPolicy("deny", source="inner")
    assert combine(a, b).decide("x", {}).rule == "outer default"
    assert strictest([]).action == "allow"
