"""The model both engines are compared on: the scripted provider plays it under
``--engine local``, the loopback server (``server.py``) under ``--engine batch``. It decides
from the messages alone (a server sees no ``meta``), as a model would.

A task ``kN`` takes ``1 + N % 4`` turns: a note (the ``note`` tool, run in a thread as user
tools are) on every turn but the last, then its answer. A synod child (its prompt says
"Vote on") answers in one turn.
"""

from __future__ import annotations

import re


def note(text: str) -> str:
    """Write a note down (a tool with no effect but its result)."""
    return f"noted: {text}"


def _texts(message) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if b.get("type") == "text"]


def steps_of(task: str) -> int:
    digits = re.sub(r"\D", "", task) or "0"
    return 1 + int(digits) % 4


def model(request, state):
    users = [m for m in request.messages if m["role"] == "user"]
    first = " ".join(_texts(users[0])) if users else ""
    m = re.search(r"task (\S+)", first)
    task = m.group(1) if m else "?"
    if any("Vote on" in t for t in _texts(users[-1])):
        return [{"type": "text", "text": f"vote {task}"}], "end_turn"
    k = sum(1 for x in request.messages if x["role"] == "assistant") + 1
    if k < steps_of(task):
        return [{"type": "text", "text": f"step {k}"},
                {"type": "tool_use", "id": f"n{k}", "name": "note",
                 "input": {"text": f"{task} {k}"}}], "tool_use"
    return [{"type": "text", "text": f"answer for {task} after {k} turns"}], "end_turn"



def delegate(request, state):
    """A task's agent starts a child (``agents_start``), waits for it (``agents_wait``), then
    answers; the child answers at once."""
    users = [m for m in request.messages if m["role"] == "user"]
    first = " ".join(_texts(users[0])) if users else ""
    m = re.search(r"task (\S+)", first)
    task = m.group(1) if m else "?"
    if any("sub of" in t for t in _texts(users[-1])):
        return [{"type": "text", "text": f"child answer for {task}"}], "end_turn"
    k = sum(1 for x in request.messages if x["role"] == "assistant") + 1
    if k == 1:
        return [{"type": "tool_use", "id": "s1", "name": "agents_start",
                 "input": {"task": f"sub of {task}"}}], "tool_use"
    if k == 2:
        return [{"type": "tool_use", "id": "w1", "name": "agents_wait", "input": {}}], \
            "tool_use"
    return [{"type": "text", "text": f"answer for {task}, its child heard"}], "end_turn"
