"""Synods: the vote, the byte-identical prefix the children share, the tool and the Python API."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.synod import normalise, vote
from mnemon.orchestrator.tools import BUILTIN
from mnemon.orchestrator.tools.builtin import CAPS_SCHEMA
from mnemon.providers.cache import flatten
from mnemon.session.records import ToolUse

from .conftest import call, fetch_tool, last_results, provider, records, say, settings


# --------------------------------------------------------------------------- the vote


def test_a_vote_on_hand_made_answers():
    v = vote(["Paris.", "**paris**", "  PARIS ", "Lyon", None, ""])
    assert (v.winner, v.tie, v.voters) == ("Paris.", False, 4)
    assert v.counts == {"paris": 3, "lyon": 1}


def test_a_tie_is_reported_not_broken():
    v = vote(["Lyon", "Paris", "paris!", "lyon.", "Nice"])
    assert v.tie and v.winner is None
    assert v.tied == ["Lyon", "Paris"], "every tied answer, in the order first given"
    assert v.counts == {"lyon": 2, "paris": 2, "nice": 1}


def test_nobody_voting_is_no_winner_and_no_tie():
    v = vote([None, "", "  "])
    assert (v.winner, v.tie, v.voters, v.counts) == (None, False, 0, {})


def test_normalise():
    assert normalise("  **The Answer:  42.**\n") == "the answer: 42"
    assert normalise("Ｐａｒｉｓ") == "paris", "NFKC"


@given(st.lists(st.sampled_from(["a", "A.", "b", "c!", None, "B"]), max_size=12))
def test_a_vote_is_a_majority_whatever_the_order(answers):
    v = vote(answers)
    assert sum(v.counts.values()) == v.voters
    top = max(v.counts.values(), default=0)
    leaders = [k for k, c in v.counts.items() if c == top]
    assert v.tie == (len(leaders) > 1)
    if v.winner is not None:
        assert v.counts[normalise(v.winner)] == top
    shuffled = vote(list(reversed(answers)))
    assert shuffled.counts == v.counts and shuffled.tie == v.tie
    assert sorted(map(normalise, shuffled.tied)) == sorted(map(normalise, v.tied))


# --------------------------------------------------------------------------- the tool


def test_the_agents_synod_schema_is_pinned():
    [tool] = [t for t in BUILTIN if t.name == "agents_synod"]
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "each child's prompt, verbatim"},
            "n": {"type": "integer", "minimum": 1, "maximum": 32,
                  "description": "how many children"},
            "reduce": {"type": "string", "enum": ["vote", "merge"], "default": "vote"},
            "stances": {"type": "array", "items": {"type": "string"},
                        "description": "optional: one stance per child, in order, added after "
                                       "the question"},
            # each member's caps (docs/orchestrator.md, "Delegation")
            **CAPS_SCHEMA},
        "required": ["question", "n"], "additionalProperties": False}


class Recording:
    """A provider that keeps every request it is sent, per agent (a fake around a real one)."""

    name = "scripted"

    def __init__(self, inner):
        self.inner = inner
        self.requests: dict[str, list] = {}

    async def complete(self, request, *, on_attempt=None):
        self.requests.setdefault(request.meta["agent"], []).append(request)
        return await self.inner.complete(request, on_attempt=on_attempt)

    async def aclose(self):
        pass


def synod_policy(request, state):
    """The parent reads three pages, then holds a synod of 4 (one tie-breaking stance); each
    child answers by its stance."""
    if request.meta["depth"] >= 1:
        said = json.dumps(request.messages[-1]["content"])
        return say("Blue." if "contrarian" in said else "red")
    k = state.get("k", 0) + 1
    state["k"] = k
    if k <= 3:
        return call(state, "fetch", i=k)
    if k == 4:
        return [ToolUse("syn", "agents_synod", {
            "question": "Which colour?", "n": 4, "reduce": "vote",
            "stances": ["", "", "Be a contrarian."]})], "tool_use"
    out = json.loads(last_results(request)[0]["content"])
    return say(f"the synod says {out['vote']['winner']}")


async def test_a_synod_shares_the_parents_cached_prefix_byte_for_byte(tmp_path):
    rec = Recording(provider(synod_policy))
    async with open_supervisor(tmp_path / "run", rec, settings(),
                               user_tools=[fetch_tool()]) as sup:
        parent = await sup.ask("read, then ask a synod")
    assert parent.answer == "the synod says red"
    kids = sorted(parent.children)
    assert len(kids) == 4
    fork_request = rec.requests[parent.id][3]  # the request that answered with agents_synod
    head = flatten(fork_request)
    for kid in kids:
        first = rec.requests[kid][0]
        assert first.system == fork_request.system and first.tools == fork_request.tools
        blocks = flatten(first)
        assert [b.prefix_hash for b in blocks[:len(head)]] == [b.prefix_hash for b in head], \
            "the child's first request begins with the parent's request, byte for byte"
        assert len(blocks) == len(head) + 1, "then its own prompt"
        call_ = [r for r in records(tmp_path / "run", kid) if r["t"] == "ProviderCall"][0]
        u = call_["usage"]
        total = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
        assert u["cache_read_tokens"] >= 0.85 * total, u  # measured by the cache model
    out = json.loads([r for r in records(tmp_path / "run", parent.id) if r["t"] == "ToolResults"
                      ][-1]["results"][0]["content"])
    assert out["vote"]["counts"] == {"red": 3, "blue": 1}
    assert [c["agent"] for c in out["children"]] == kids


async def test_the_python_api_votes_and_merges(tmp_path):
    def policy(request, state):
        if request.meta["depth"] >= 1:
            said = json.dumps(request.messages[-1]["content"])
            return say("Lyon" if "lyon" in said else "Paris")
        return say("I have read the brief.")

    async with open_supervisor(tmp_path / "run", provider(policy), settings()) as sup:
        parent = await sup.ask("the brief")
        tie = await sup.synod(parent, "Which city?", n=4, reduce="vote",
                              stances=["say lyon", "say lyon"])
        assert tie.vote.tie and tie.answer is None and tie.vote.tied == ["Lyon", "Paris"]
        merged = await sup.synod(parent, "Which city?", n=2, reduce="merge")
        assert merged.vote is None and [c["answer"] for c in merged.children] == ["Paris"] * 2
    for c in tie.children + merged.children:
        recs = records(tmp_path / "run", c["agent"])
        assert recs[0]["parent"] == parent.id and recs[0]["kind"] == "mnemon"
        assert recs[1]["t"] == "Inherited" and len(recs[1]["turns"]) == 1, \
            "the brief, not the parent's answer (the turn in hand) is inherited"


async def test_a_synod_tool_refusal_names_the_state(tmp_path):
    def policy(request, state):
        if state.get("k"):
            return say(last_results(request)[0]["content"])
        state["k"] = 1
        return [ToolUse("s", "agents_synod", {"question": "q", "n": 99})], "tool_use"

    async with open_supervisor(tmp_path / "run", provider(policy), settings()) as sup:
        node = await sup.ask("go")
    assert node.answer == "a synod has 1 to 32 children, not 99"
    assert not node.children
