"""Steering a running agent from above: messages into it (``agents_send``, ``/steer``, ``POST
/v1/agents/{id}/steer``), notes to a parent about its children (a cap reached, an approval
asked, what a resume found), and the status of a tree of agents read off the live nodes
(``agents_status``; docs/orchestrator.md, "Delegation").

Every message is recorded at once in the receiving agent's log as ``Steering`` (``by``:
``parent``, ``user`` or ``harness``): it extends the turn in hand, so the agent's next request
carries it — a message sent while a request is in flight is read by the one after, never lost,
and a crash after the send keeps it. The sender's side is its own record (the parent's
``agents_send`` call, the service's and chat's logs).

Status is read from the supervisor's tables — the nodes' counters, their caps, the calls they
are in, the run's pending approvals — never by folding a log: cheap enough for a parent to
call every turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lineage.runroot import now_iso
from ..session.errors import Refusal
from ..session.records import Steering, compact
from .caps import status as caps_status
from .caps import tokens

if TYPE_CHECKING:
    from .node import AgentNode

__all__ = ["INPUT_CHARS", "LAST_LINE_CHARS", "MESSAGE_MAX_BYTES", "ask_note", "note", "send",
           "status", "told_parent"]

#: the longest message one send carries (a message is context the receiver pays for each turn)
MESSAGE_MAX_BYTES = 16_384
#: the last line an agent wrote, as ``agents_status`` shows it
LAST_LINE_CHARS = 200


def send(node: "AgentNode", text: str, *, by: str, sender: str | None = None) -> dict[str, Any]:
    """Deliver ``text`` to a running agent as steering its next request carries. Refused
    (``Refusal`` naming the state) for an agent that has ended or whose log is not open yet,
    and for an empty or oversized message."""
    if not isinstance(text, str) or not text.strip():
        raise Refusal("a message may not be empty")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MESSAGE_MAX_BYTES:
        raise Refusal(f"a message is at most {MESSAGE_MAX_BYTES} bytes — this one has {size}")
    if node.state != "running" or node.done.is_set():
        why = f" ({node.reason})" if node.reason else ""
        raise Refusal(f"agent {node.id} has {node.state}{why}: a message reaches only a running "
                      "agent")
    if node.log is None:
        raise Refusal(f"agent {node.id} is starting (its MCP servers are not up yet): send it "
                      "the message once it runs")
    head = (f"[message from your parent {sender}]" if by == "parent" else
            "[message from a person]" if by == "user" else "[note]")
    node.log.append(Steering(text=f"{head} {text}", by=by))  # type: ignore[arg-type]
    node.messages += 1
    node.steered += 1
    return {"agent": node.id, "delivered": "at its next request", "messages": node.messages,
            "at": now_iso()}


def note(node: "AgentNode | None", text: str) -> bool:
    """A harness note to a running agent (its next request carries it); False when it is not
    running or has no log open (nothing is written)."""
    if node is None or node.state != "running" or node.log is None or node.done.is_set():
        return False
    if node.ctx.in_hand is None:
        return False
    node.log.append(Steering(text=text, by="harness"))
    node.steered += 1
    return True


#: how much of a call's input an approval note quotes (the whole is in the child's log)
INPUT_CHARS = 2000


def ask_note(to: "AgentNode", p: Any) -> bool:
    """Tell ``to`` that a call below it waits for its decision (an ``ask_parent``): which
    agent, which call, the rule and its reason, the input (bounded), and how to decide."""
    who = p.agent
    n = p.node.parent
    rel = "your child" if n is to else "your descendant"
    via = f" (through {n.id})" if n is not None and n is not to else ""
    raw = compact(p.input).decode("utf-8", "replace")
    quoted = raw if len(raw) <= INPUT_CHARS else raw[:INPUT_CHARS] + "…"
    rule = f"; {p.rule}" if p.rule else ""
    why = f": {p.reason}" if p.reason else ""
    return note(to, (
        f"[approval asked] {rel} {who}{via} asks to run {p.tool} with {quoted} (the policy "
        f"says ask_parent{rule}{why}). It waits for your decision: approvals_decide "
        f"{{\"agent\": \"{who}\", \"call_id\": \"{p.call_id}\", \"decision\": \"approve\" or "
        f"\"reject\", \"reason\": \"…\"}}. You may approve only a call you could make "
        "yourself; anything else goes to a person."))


def _last_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-1].strip()
    return last if len(last) <= LAST_LINE_CHARS else last[:LAST_LINE_CHARS - 1] + "…"


def status(node: "AgentNode", approvals: Any = None) -> dict[str, Any]:
    """One agent as ``agents_status`` shows it: state (and why it ended), turns, tokens and
    cost so far, its caps beside what its tree spent, the tools it is in now, the approvals it
    waits on, the messages it was sent, and the last line it wrote."""
    out: dict[str, Any] = {"agent": node.id, "kind": node.kind, "state": node.state,
                           "turns": node.turns_taken, "tokens": tokens(node.usage),
                           "cost_usd": round(node.cost_usd, 6)}
    if node.role is not None:
        out["role"] = node.role
    if node.reason is not None:
        out["reason"] = node.reason
    if node.children:
        out["children"] = sorted(node.children)
    b = caps_status(node)
    if b is not None:
        out["budget"] = b
    if node.in_tools:
        out["in_tools"] = sorted(set(node.in_tools.values()))
    if approvals is not None:
        waits = [p for p in approvals.pending() if p.agent == node.id]
        if waits:
            out["approvals"] = [{"call_id": p.call_id, "tool": p.tool,
                                 **({"to": p.to} if p.to else {})} for p in waits]
    if node.messages:
        out["messages"] = node.messages
    last = _last_line(node.answer)
    if last is not None:
        out["last_line"] = last
    return out


def told_parent(node: "AgentNode", reason: str) -> bool:
    """A child that reached a cap tells its parent, by a note the parent's next request
    carries (docs/orchestrator.md, "Delegation"): which cap, and what it spent."""
    b = caps_status(node) or {}
    if reason == "budget":
        spent = ", ".join(x for x in (
            f"${b['spent_usd']:.4f} of ${b['usd']:.4f}" if "usd" in b else "",
            f"{b['spent_tokens']} of {b['tokens']} tokens" if "tokens" in b else "") if x)
        what = f"its budget ({spent})" if spent else "a budget above it"
    else:
        what = f"its {node.turns_taken} turns"
    last = f"; its last text: {node.answer[:200]}" if node.answer else ""
    return note(node.parent, f"[child ended] your child {node.id} ended {reason}: it used {what}"
                      f"{last}. Read its transcript with transcript_read(agent=\"{node.id}\").")
