"""Policies and a tool that test jobs load by import path (copied beside each test's job file).

They decide from what the model is sent, as a model would: a task agent's step is one more than
the assistant turns it can see, so a resumed agent never plays a step twice unless the harness
requests a recorded turn again. ``KILL_AT_CALL`` / ``KILL_IN_TOOL`` (environment) SIGKILL this
process at the Nth provider call or tool call it makes — kill points for the resume test.
"""

from __future__ import annotations

import os
import re
import signal

CALLS = {"provider": 0, "tool": 0}
FAILED: set[str] = set()


def _maybe_kill(kind: str, variable: str) -> None:
    CALLS[kind] += 1
    at = os.environ.get(variable)
    if at and CALLS[kind] == int(at):
        os.kill(os.getpid(), signal.SIGKILL)


def note(text: str) -> str:
    """Write a note down (a tool with no effect but its result)."""
    _maybe_kill("tool", "KILL_IN_TOOL")
    return f"noted: {text}"


def _task(request) -> str:
    first = request.messages[0]["content"]
    text = first if isinstance(first, str) else first[0].get("text", "")
    m = re.search(r"task (\S+)", text)
    return m.group(1) if m else "?"


def _assistant_turns(request) -> int:
    return sum(1 for m in request.messages if m["role"] == "assistant")


def steps(request, state):
    """A task agent: ``STEPS`` turns (a note per turn, then the answer); a synod child: one
    turn, its vote."""
    _maybe_kill("provider", "KILL_AT_CALL")
    total = int(os.environ.get("STEPS", "3"))
    task = _task(request)
    if request.meta.get("depth", 0) >= 1:
        return [{"type": "text", "text": f"vote {task}"}], "end_turn"
    k = _assistant_turns(request) + 1
    if k < total:
        return [{"type": "text", "text": f"step {k}"},
                {"type": "tool_use", "id": f"n{k}", "name": "note",
                 "input": {"text": f"{task} {k}"}}], "tool_use"
    return [{"type": "text", "text": f"step {k}: answer for {task}"}], "end_turn"


def forever(request, state):
    """Never done: a note every turn (budget tests)."""
    k = _assistant_turns(request) + 1
    return [{"type": "tool_use", "id": f"n{k}", "name": "note", "input": {"text": str(k)}}], \
        "tool_use"


def flaky(request, state):
    """Fails the first request of every task agent once, then answers."""
    task = _task(request)
    if task not in FAILED:
        FAILED.add(task)
        raise RuntimeError(f"flaky model on {task}")
    return [{"type": "text", "text": f"answer for {task}"}], "end_turn"


def stances(request, state):
    """A synod child answers by its stance; the parent answers its task plainly."""
    if request.meta.get("depth", 0) >= 1:
        said = str(request.messages[-1]["content"])
        for word in ("red", "blue", "green"):
            if f"say {word}" in said:
                return [{"type": "text", "text": f"**{word.upper()}.**"}], "end_turn"
        return [{"type": "text", "text": "red"}], "end_turn"
    if "Your synod's children" in str(request.messages[-1]["content"]):
        return [{"type": "text", "text": "merged"}], "end_turn"
    return [{"type": "text", "text": f"answer for {_task(request)}"}], "end_turn"


def delegate(request, state):
    """The task agent starts one child, waits for it (again, if the wait was interrupted), then
    answers with the child's answer; the child writes a note, then answers."""
    import json

    _maybe_kill("provider", "KILL_AT_CALL")
    task = _task(request)
    if request.meta.get("depth", 0) >= 1:
        if _assistant_turns(request) == 0:
            return [{"type": "tool_use", "id": "c1", "name": "note",
                     "input": {"text": task}}], "tool_use"
        return [{"type": "text", "text": f"child done {task}"}], "end_turn"
    said = [b for m in request.messages if m["role"] == "assistant" for b in m["content"]]
    last = [b for b in request.messages[-1]["content"] if b.get("type") == "tool_result"]
    if not any(b.get("name") == "agents_start" for b in said):
        return [{"type": "tool_use", "id": "s1", "name": "agents_start",
                 "input": {"task": f"task {task}: help"}}], "tool_use"
    if said[-1].get("name") == "agents_start" or (last and last[0]["is_error"]):
        k = _assistant_turns(request)
        return [{"type": "tool_use", "id": f"w{k}", "name": "agents_wait",
                 "input": {}}], "tool_use"
    out = json.loads(last[0]["content"])
    return [{"type": "text", "text": "root got: " + out[0]["answer"]}], "end_turn"
