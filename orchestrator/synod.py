"""Synod: N mnemon children forked at one turn boundary from one context deliberate on one
question; the parent reduces their answers.

All N forks are taken from the same table before any child runs, so their links are identical
and each child's first request renders the parent's context byte for byte, followed by its own
prompt: the provider's prefix cache serves every sibling from the one prefix the parent already
paid for. A child's prompt is the question, verbatim, then its stance (if one was given) after a
blank line — the words are the caller's, never the harness's.

Reductions:

* ``vote`` — the majority of the normalised answers (``normalise``); a tie is reported with every
  tied answer, never broken silently; children that ended without an answer do not vote.
* ``merge`` — every child's answer goes back to the parent (as the ``agents_synod`` tool result,
  or as the job's merge prompt); the parent's next turn reads them, and any child's transcript
  through the transcript tools and the child's id.

A typed synod (``output``: every child answers in one output type) votes field by field
(``typed.vote``: the majority per top-level field, ties listed), and a merge hands the parent
every child's typed output.

The arithmetic of a vote is pure (``vote``); ``run_synod`` forks, runs and waits. It makes and
starts its children through ``env.spawner`` alone (``spawner.Spawner``), never the supervisor.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import trio
from msgspec import Struct

from .caps import Caps, grant, tokens
from ..errors import UserError
from ..session.errors import Refusal

from .servers import serving
from .typed.vote import FieldVote, vote_fields
from .workspace.life import apply_children

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

REDUCE = ("vote", "merge")
MAX_N = 32

_SPACE = re.compile(r"\s+")
_EDGE = "\"'`*_.,;:!?()[]{} "


def normalise(answer: str) -> str:
    """What a vote compares: NFKC, case-folded, whitespace collapsed, and quotes, emphasis and
    trailing punctuation stripped from both ends ("**Paris.**" and "paris" are one vote)."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = _SPACE.sub(" ", text).strip(_EDGE)
    return text


class Vote(Struct, frozen=True, kw_only=True):
    winner: str | None
    """The winning answer as the first child that gave it wrote it; None on a tie or no votes."""
    tie: bool
    tied: list[str]
    """On a tie, every tied answer (first-given spelling), in the order first given."""
    counts: dict[str, int]
    """Votes per normalised answer, most votes first (ties in the order first given)."""
    voters: int

    def as_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "tie": self.tie, "tied": self.tied, "counts": self.counts,
                "voters": self.voters}


def vote(answers: list[str | None]) -> Vote:
    """The majority of ``answers`` after ``normalise``; empty and missing answers abstain."""
    first: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for a in answers:
        if a is None or not normalise(a):
            continue
        key = normalise(a)
        first.setdefault(key, a.strip())
        counts[key] += 1
    order = list(first)  # first-given order
    ranked = sorted(order, key=lambda k: -counts[k])  # stable: ties keep first-given order
    top = counts[ranked[0]] if ranked else 0
    leaders = [k for k in ranked if counts[k] == top]
    tie = len(leaders) > 1
    return Vote(winner=None if tie or not leaders else first[leaders[0]], tie=tie,
                tied=[first[k] for k in leaders] if tie else [],
                counts={k: counts[k] for k in ranked}, voters=sum(counts.values()))


class SynodResult(Struct, kw_only=True):
    reduce: str
    children: list[dict[str, Any]]
    """Each child's ``AgentNode.outcome()``: agent, kind, state, answer, cost_usd."""
    vote: Vote | None = None
    fields: FieldVote | None = None
    """A typed synod's vote, field by field (``typed.vote``)."""
    applied: dict[str, Any] | None = None
    """``apply="winner"`` (docs/workspace.md): ``{"agent", "snapshot"}`` — the member whose
    change was merged into the parent's workspace — or ``{"agent", "refused"}`` on a
    conflict (the parent's files untouched), or ``{"refused"}`` with no winner."""

    @property
    def answer(self) -> str | None:
        """The vote's winner (None on a tie, or for a merge: the parent's next turn decides)."""
        return self.vote.winner if self.vote is not None else None

    @property
    def output(self) -> dict[str, Any] | None:
        """A typed synod's voted object (see ``fields`` for its ties), else None."""
        return self.fields.output if self.fields is not None else None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reduce": self.reduce, "children": self.children}
        if self.vote is not None:
            out["vote"] = self.vote.as_dict()
        if self.fields is not None:
            out["vote"] = self.fields.as_dict()
        if self.applied is not None:
            out["applied"] = self.applied
        return out


def child_task(question: str, stance: str | None) -> str:
    """A child's first prompt: the question, then its stance after a blank line."""
    return question if not stance else f"{question}\n\n{stance}"


def check(question: str, n: int, reduce: str, stances: list[str] | None) -> None:
    if not question.strip():
        raise Refusal("a synod's question may not be empty")
    if not 1 <= n <= MAX_N:
        raise Refusal(f"a synod has 1 to {MAX_N} children, not {n}")
    if reduce not in REDUCE:
        raise Refusal(f"reduce is 'vote' or 'merge', not {reduce!r}")
    if stances is not None and len(stances) > n:
        raise Refusal(f"{len(stances)} stances for {n} children: give at most one per child")


def fork_synod(env: "AgentEnv", parent: "AgentNode", question: str, *, n: int,
               stances: list[str] | None = None,
               ids: list[str] | None = None, output: Any = None,
               caps: Caps | None = None) -> list["AgentNode"]:
    """Fork the ``n`` children at once (synchronous: nothing appends to the parent between the
    forks, so every link is the same table). Stances are dealt in order; children past the
    last stance get the bare question. ``ids`` names them (default: minted). ``output``: the
    children's output type (``providers.typed.OutputType``), if typed."""
    stances = stances or []
    new_child = env.spawner.new_child
    kw: dict[str, Any] = {"output": output} if output is not None else {}
    if caps:  # each member's caps, all n set aside at once: refused whole, or given to all
        s = env.settings_for(parent)
        grant(parent, Caps(caps.usd * n if caps.usd is not None else None,
                           caps.tokens * n if caps.tokens is not None else None, caps.turns),
              Caps(), s, (tokens(env.spend.usage), env.spend.cost_usd),
              parent.cap_turns if parent.cap_turns is not None else s.max_turns)
        kw["caps"] = caps
    return [new_child(parent, child_task(question, stances[i] if i < len(stances) else None),
                          "mnemon", agent_id=ids[i] if ids else None, **kw) for i in range(n)]


async def wait_synod(env: "AgentEnv", parent: "AgentNode", children: list["AgentNode"],
                     reduce: str) -> SynodResult:
    """Run every child not yet running — in the parent's nursery while the parent's loop runs
    (a tool call), else in a nursery of this call, with the parent's own MCP servers started
    again around it (the children are offered their tools; decision 0244) — wait for all, and
    reduce."""
    start = env.spawner.start
    idle = [c for c in children if not c.started and not c.done.is_set()]
    if parent.nursery is not None and parent.state == "running" and parent.started:
        for c in idle:
            start(c, parent.nursery)
        before, parent.blocked_in = parent.blocked_in, "agents_synod"
        try:  # its members' ask_parent goes to a person: it cannot decide while it waits
            for c in children:
                await c.done.wait()
        finally:
            parent.blocked_in = before
    else:
        async with serving(env, parent) if idle else nullcontext():
            async with trio.open_nursery() as nursery:
                for c in idle:
                    start(c, nursery)
        for c in children:
            await c.done.wait()
    outcomes = [c.outcome() for c in children]
    result = SynodResult(reduce=reduce, children=outcomes)
    if reduce == "vote" and any(c.output_type is not None for c in children):
        result.fields = vote_fields([o.get("output") for o in outcomes], normalise)
    elif reduce == "vote":
        result.vote = vote([o["answer"] if o["state"] == "ended" else None for o in outcomes])
    return result


async def run_synod(env: "AgentEnv", parent: "AgentNode", question: str, *, n: int,
                    reduce: str = "vote", stances: list[str] | None = None,
                    output: Any = None, apply: str | None = None,
                    caps: Caps | None = None) -> SynodResult:
    """Fork, run, wait, reduce (``Supervisor.synod`` and the ``agents_synod`` tool); with
    ``output`` (an ``OutputType``) the children answer typed and a vote is field by field.
    ``apply="winner"``: each member worked in its own workspace; the change of the first
    member that gave the winning answer is merged into the parent's (``apply_winner``).

    ``caps``: each member's (``caps.Caps``), set aside from what the parent has left.

    Cancellation: cancelling the caller cancels the children it started.
    """
    check(question, n, reduce, stances)
    if apply not in (None, "winner"):
        raise Refusal(f"apply is 'winner' or nothing, not {apply!r}")
    if apply is not None and (reduce != "vote" or parent.workspace is None):
        raise Refusal("apply='winner' needs a vote and a parent with a workspace")
    children = fork_synod(env, parent, question, n=n, stances=stances, output=output,
                          caps=caps)
    result = await wait_synod(env, parent, children, reduce)
    if apply == "winner":
        await apply_winner(parent, children, result)
    return result


async def apply_winner(parent: "AgentNode", children: list["AgentNode"],
                       result: SynodResult) -> None:
    """Merge the change of the first member whose answer won the vote into the parent's
    workspace (three-way; all or nothing) and record it; a conflict or no winner is said in
    ``result.applied`` and leaves the parent's files as they were."""
    win = result.answer
    if win is None:
        result.applied = {"refused": "no winner (a tie, or no answers)"}
        return
    key = normalise(win)
    member = next(c for c in children
                  if c.state == "ended" and c.answer is not None and normalise(c.answer) == key)
    try:
        rec = await apply_children(parent.workspace, [member])
    except UserError as e:
        result.applied = {"agent": member.id, "refused": str(e)}
        return
    parent.log.append(rec)
    result.applied = {"agent": member.id, "snapshot": rec.snapshot}
