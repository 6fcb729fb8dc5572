"""The guarantees every importer keeps, checked on a finished :class:`~.model.Trajectory`.

The replay driver folds a Trajectory through the real session fold, which refuses a result with no
call in hand or a call left unanswered; checking the value here names the breach by step instead.
The guarantees:

* the first step is a ``UserStep``; a recording that opens with an assistant turn gets the
  synthetic line :data:`~.model.OPENS_WITH_ASSISTANT` first;
* the ``ToolStep`` (or steps) right after an ``AssistantStep`` answer each of its calls exactly
  once, in a ``ToolResult`` whose ``content`` is a string; a call with no recorded result is
  answered :data:`~.model.NO_RESULT` with ``is_error`` true; no result answers a call that is not
  in hand;
* call ids are unique within one message; a rewind lands on an earlier step, never between a call
  and its result.

Text kept verbatim is the fourth guarantee; it needs the raw file, so the tests check it.
"""

from __future__ import annotations

from ...session.records import ToolUse
from .model import AssistantStep, RewindStep, ToolStep, Trajectory, UserStep


def check_invariants(trajectory: Trajectory) -> list[str]:
    """Every way ``trajectory`` (and its children) breaks the guarantees; empty when it keeps them."""
    problems: list[str] = []
    _check(trajectory, trajectory.name or "trajectory", problems)
    return problems


def _check(t: Trajectory, where: str, problems: list[str]) -> None:
    steps = t.steps
    if steps and not isinstance(steps[0], UserStep):
        problems.append(f"{where}: step 0 is {type(steps[0]).__name__}, not a UserStep")
    pending: dict[str, bool] | None = None  # the calls of the assistant step in hand
    for i, step in enumerate(steps):
        if isinstance(step, ToolStep):
            if pending is None:
                problems.append(f"{where}: step {i} is a ToolStep that follows no assistant step")
                continue
            for r in step.results:
                if not isinstance(r.content, str):
                    problems.append(f"{where}: step {i} result {r.tool_use_id} content is not a string")
                if pending.get(r.tool_use_id) is not False:
                    problems.append(f"{where}: step {i} result {r.tool_use_id} answers no call in hand")
                else:
                    pending[r.tool_use_id] = True
            continue
        if pending is not None:
            missing = [c for c, done in pending.items() if not done]
            if missing:
                problems.append(f"{where}: calls {missing} are not answered before step {i}")
        pending = None
        if isinstance(step, AssistantStep):
            ids = [b.id for b in step.blocks if isinstance(b, ToolUse)]
            if len(set(ids)) != len(ids):
                problems.append(f"{where}: step {i} repeats a call id")
            pending = {c: False for c in ids}
        elif isinstance(step, RewindStep):
            k = step.to_step
            if not -1 <= k < i or (k >= 0 and isinstance(steps[k], RewindStep)):
                problems.append(f"{where}: step {i} rewinds to {k}, not an earlier step")
            elif k >= 0 and isinstance(steps[k], AssistantStep) and any(
                    isinstance(b, ToolUse) for b in steps[k].blocks):
                problems.append(f"{where}: step {i} rewinds to {k}, between a call and its result")
    if pending is not None and not all(pending.values()):
        problems.append(f"{where}: calls at the end are not answered")
    for child in t.children:
        _check(child, f"{where}/{child.name}", problems)
