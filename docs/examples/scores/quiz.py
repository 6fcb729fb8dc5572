"""The scores example's model, played offline (scripted provider): it answers arithmetic, and
grades answers when asked as a judge.

Each synod child gets one task in three wrong (which one depends on the child), so one child
alone is right two times in three, and three children voting are right every time: the two
variants of ``quiz.toml`` differ in accuracy and in cost, as real strategies do.
"""

from __future__ import annotations

import json
import re

_SUM = re.compile(r"What is (\d+) ([+×-]) (\d+)\?")
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "×": lambda a, b: a * b}


def _texts(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text") or str(b.get("content") or "") for b in content or ())


def _solve(text: str) -> int | None:
    m = _SUM.search(text)
    return _OPS[m.group(2)](int(m.group(1)), int(m.group(3))) if m else None


def policy(request, state):
    said = " ".join(_texts(m) for m in request.messages)
    if request.output is not None and "You are grading" in said:  # the judge's verdict
        expected = re.search(r"<expected>\s*(.*?)\s*</expected>", said, re.S)
        answer = re.search(r"<answer>\s*(.*?)\s*</answer>", said, re.S)
        got = re.findall(r"-?\d+", answer.group(1) if answer else "")
        right = bool(expected and got and got[-1] == expected.group(1).strip())
        verdict = {"value": 1.0 if right else 0.0,
                   "explanation": "the number matches" if right else "a different number"}
        return [{"type": "text", "text": json.dumps(verdict)}], "end_turn"
    value = _solve(said)
    agent = request.meta.get("agent", "t1")
    if request.meta.get("depth", 0) >= 1:  # a synod child: wrong on one task in three
        task, child = (int(x) for x in re.findall(r"\d+", agent)[:2])
        if (task + child) % 3 == 0 and value is not None:
            value += 1
    return [{"type": "text", "text": f"The answer is {value}."}], "end_turn"


def brevity(answer: str) -> tuple[float, str]:
    """A user scorer (``kind = "python"``): full marks for a short answer."""
    return (1.0, "short") if len(answer) <= 40 else (0.5, f"{len(answer)} characters")
