"""The ``model`` scorer's judge: what it is asked, the typed verdict it answers in, its id.

The judge is an ordinary agent of the run root (``jobs/scoring.py`` runs it), so its calls
are recorded and a killed scoring resumes it from its log like any task's agent: a verdict
already recorded is read back, never asked again. Its id names the scorer, the task's agent
and a digest of what it is asked, so a changed rubric (or answer) is a new judge, and an
unchanged one is the same judge — ``mnemon score`` run twice asks nothing the second time.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .scorers import Score, as_score
from .spec import ScoreSpec

__all__ = ["VERDICT", "judge_id", "judge_prompt", "verdict_score"]

VERDICT: dict[str, Any] = {
    "title": "Verdict",
    "type": "object",
    "properties": {
        "value": {"type": "number", "minimum": 0, "maximum": 1,
                  "description": "the grade: 1 fully meets the rubric, 0 not at all"},
        "explanation": {"type": "string", "description": "why, in a sentence or two"},
    },
    "required": ["value", "explanation"],
    "additionalProperties": False,
}
"""The judge's output type: its typed verdict is the score."""


def judge_prompt(spec: ScoreSpec, *, task: str, target: str | None, answer: str) -> str:
    """What the judge is asked: the rubric, then the task, the expected answer (when there is
    one) and the answer, each fenced so an answer cannot pass itself off as the rubric."""
    parts = [f"You are grading an answer. Rubric:\n{spec.rubric}",
             f"<task>\n{_inert(task)}\n</task>"]
    if target is not None:
        parts.append(f"<expected>\n{_inert(target)}\n</expected>")
    parts.append(f"<answer>\n{_inert(answer)}\n</answer>")
    parts.append("Give your verdict: value, a number from 0 to 1, and a short explanation.")
    return "\n\n".join(parts)


def _inert(text: str) -> str:
    """A fenced text that cannot close its fence (or open another): an answer that writes
    ``</answer>`` and a rubric of its own after it stays inside its fence."""
    return re.sub(r"<(/?)(task|expected|answer)\b", r"<\1\2_", text, flags=re.I)


def judge_id(spec: ScoreSpec, agent: str, prompt: str) -> str:
    """``judge-<scorer>-<task agent>-<digest of its prompt and role>``: a path-safe agent id."""
    digest = hashlib.blake2b(f"{spec.role}\0{prompt}".encode("utf-8", "surrogatepass"),
                             digest_size=4).hexdigest()
    return f"judge-{spec.name}-{agent}-{digest}"


def verdict_score(output: Any, reason: str | None, agent: str, cost_usd: float) -> dict:
    """A judge's end as the task's score: its verdict, or the error its end names."""
    base: dict[str, Any] = {"judge": agent, "cost_usd": round(cost_usd, 6)}
    if reason != "done" or not isinstance(output, dict):
        return {"value": None, "error": f"the judge ended {reason or 'without a verdict'}",
                **base}
    try:
        s = as_score(output)
    except Exception as e:  # noqa: BLE001 - a verdict out of range is the task's error
        return {"value": None, "error": f"the judge's verdict: {e}", **base}
    return {**Score(value=s.value, explanation=s.explanation).as_dict(), **base}
