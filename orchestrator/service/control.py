"""The service's control routes: approvals (list, decide) and resuming agents (one on request,
or every agent a crash left running when the service starts over an existing run root).

``GET /v1/approvals`` lists the requests the agents of this service wait on now;
``POST /v1/agents/{id}/approvals/{call_id}`` decides one (200 with the recorded decision, 400 a
decision that is neither approve nor reject, 404 no such request of this agent, 409 decided
already or not waiting); ``POST /v1/agents/{id}/resume`` resumes an agent whose log shows it was
running when its process died (docs/policy.md, docs/service.md).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import structlog
from msgspec import Meta, Struct

from ...lineage.runroot import now_iso
from ...session.errors import SessionError
from ...session.records import SessionResumed
from ..approvals import AlreadyDecided, BadDecision, UnknownApproval
from ..terminal import shown
from .runs import Conflict, NotFound, Run
from ...errors import UserError

log = structlog.get_logger("mnemon.service")


class ApprovalOut(Struct, kw_only=True, omit_defaults=True):
    """A request an agent waits on: its call, the input it would run with, why it was asked;
    ``job``: the service's job whose agent it is (decided at ``/v1/jobs/{id}/approvals/…``);
    ``to``: the agent it waits for (``ask_parent``) — a person may decide it all the same."""
    agent: str
    call_id: str
    tool: str
    input: Any
    reason: str | None = None
    rule: str | None = None
    requested_at: str | None = None
    job: str | None = None
    # the agent that decides it now (an ``ask_parent``: docs/policy.md); absent: a person
    to: str | None = None


class ApprovalList(Struct, kw_only=True):
    approvals: list[ApprovalOut]


class DecisionIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """``approve`` (with ``input``: the edited input the tool receives) or ``reject``
    (``reason``: what the model reads as the call's error result)."""
    # a plain string, judged by the handler: an unknown decision is a 400 naming it
    decision: Annotated[str, Meta(description="approve or reject", examples=["approve"])]
    reason: str | None = None
    input: dict[str, Any] | None = None


class DecisionOut(Struct, kw_only=True):
    """The decision as recorded in the agent's log."""
    agent: str
    call_id: str
    decision: str
    reason: str | None = None
    input: dict[str, Any] | None = None
    by: str | None = None
    at: str | None = None


class BadRequest(UserError):
    """A request the service refuses as malformed (400)."""


def list_approvals(run: Run) -> ApprovalList:
    """The served run's waiting calls, then those of the jobs this service runs (a job whose
    ``[policy] on_ask`` is ``wait``)."""
    sup = run.sup
    pending = sup.approvals.pending() if sup is not None else []
    out = [ApprovalOut(**p.as_dict()) for p in pending]
    for sj in run.jobs.jobs.values():
        if sj.state == "running":
            out += [ApprovalOut(**p.as_dict(), job=sj.id)
                    for p in sj.runner.sup.approvals.pending()]
    return ApprovalList(approvals=out)


def decide(run: Run, aid: str, call_id: str, body: DecisionIn) -> DecisionOut:
    return _decide(run, run._writable(), aid, call_id, body)


def decide_in_job(run: Run, jid: str, aid: str, call_id: str, body: DecisionIn) -> DecisionOut:
    sj = run.jobs.jobs.get(jid)
    if sj is None:
        raise NotFound(f"no job {jid!r} in this service")
    if sj.state != "running":
        raise Conflict(f"job {jid} is not running ({sj.state})")
    return _decide(run, sj.runner.sup, aid, call_id, body)


def _decide(run: Run, sup: Any, aid: str, call_id: str, body: DecisionIn) -> DecisionOut:
    try:
        rec = sup.approvals.decide(aid, call_id, body.decision, reason=body.reason,
                                   input=body.input, by="api")
    except BadDecision as e:
        raise BadRequest(str(e)) from None
    except UnknownApproval as e:
        raise NotFound(str(e)) from None
    except AlreadyDecided as e:
        raise Conflict(str(e)) from None
    run._poke()
    return DecisionOut(agent=aid, call_id=rec.call_id, decision=rec.decision,
                       reason=rec.reason, input=rec.input, by=rec.by, at=rec.at)


def refuse_recorded(aid: str, call_id: str, entry: list | None) -> None:
    """A request no agent of this process waits on, judged by its agent's log (``entry``: the
    fold's ``[ApprovalRequested, ApprovalDecided | None]`` for the call, or None): decided
    already, or waiting for the agent to be resumed — both 409; no record returns (404)."""
    if entry is None:
        return
    if entry[1] is not None:
        raise Conflict(f"the call {call_id} of agent {aid} was decided already "
                       f"({entry[1].decision})")
    raise Conflict(f"agent {aid} is not running, so it is not waiting on the call {call_id}: "
                   f"resume it first (POST /v1/agents/{aid}/resume)")


def resume(run: Run, aid: str):
    """Resume one agent whose log has no end (a crash left it running), or one that ended
    cancelled (a stop): it goes on from its log — a recorded turn is never requested again, a
    pending approval is waited on again."""
    sup = run._writable()
    if aid not in run.agent_ids():
        raise NotFound(f"no agent {aid!r} in this run")
    node = sup.agents.get(aid)
    if node is not None and node.state == "running":
        raise Conflict(f"agent {aid} is running")
    scan = run._scan(aid)
    if scan.ended and scan.reason != "cancelled":
        raise Conflict(f"agent {aid} ended ({scan.reason}): send it a prompt to go on")
    if node is not None:  # reopened here before (a view, an edit): its log stays open
        sup.agents.pop(aid, None)
        if node.log is not None:
            node.log.close()
    parent = sup.agents.get(scan.parent) if scan.parent else None
    if parent is not None and parent.state != "running":
        parent = None
    node = sup.resume_agent(aid, parent=parent)
    if scan.ended:
        node.log.append(SessionResumed(at=now_iso()))
    sup.start(node, parent.nursery if parent is not None else None)
    log.info("agent resumed", agent=aid)
    run._poke()
    return run.view(aid)


def resume_crashed(run: Run) -> list[str]:
    """At start over an existing run root: resume every agent whose log shows it was running
    when the process died (no end recorded), parents before children (``resume_run``)."""
    sup = run._writable()
    try:
        roots = sup.resume_run()
    except SessionError as e:  # a log that does not fold, or one another process writes: the
        # service still serves; each agent can be resumed (or looked at) on its own
        log.error("could not resume the run's agents", error=str(e))
        sys.stderr.write(f"mnemon: not resuming: {shown(' '.join(str(e).split()))}\n")
        return []
    for node in roots:
        sup.start(node)
    ids = [n.id for n in sup.agents.values()]
    if ids:
        log.info("agents resumed", agents=ids)
        run._poke()
    return ids


__all__ = ["ApprovalList", "ApprovalOut", "BadRequest", "DecisionIn", "DecisionOut",
           "decide", "decide_in_job", "list_approvals", "refuse_recorded", "resume",
           "resume_crashed"]
