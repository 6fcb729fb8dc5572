"""Checking a typed answer: what the model gave, whether it fits, and what the harness says back.

Pure: ``candidate`` finds the answer in a response's blocks (the final-answer tool's input, or
the text as JSON), ``check_answer`` validates it against the output type (after ``loosen``: a
``null`` that strict mode made stand for an absent optional field is removed) and words the
problems for the model — each with its JSON path — the way a retry is asked for.

This module was ``typed/judge.py`` with ``judge`` and ``Verdict``: names the tool policy's
``gate.judge`` and ``policy.Verdict`` (is this call allowed?) and the fold's ``session/judge.py``
(does the table take this record?) also use. The old names stay one release (decision 0344).
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct

from ...providers.typed import OUTPUT_TOOL, OutputType, loosen, problems
from ...session.records import Text, ToolUse

__all__ = ["AnswerCheck", "candidate", "check_answer", "check_answer_off_loop", "retry_text",
           "parse_text", "Verdict", "judge", "judge_off_loop"]


class AnswerCheck(Struct, frozen=True):
    """``value`` when the answer fits; else ``error``, one line per problem."""

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_text(text: str) -> Any:
    """The JSON in an answer's text: the whole text, or — a habit of models asked for JSON —
    the inside of one fenced block around it. Raises ``ValueError``."""
    body = text.strip()
    if body.startswith("```"):
        first, _, rest = body.partition("\n")
        if rest.rstrip().endswith("```"):
            body = rest.rstrip()[:-3].strip()
    return json.loads(body)


def candidate(blocks: list[Any]) -> tuple[bool, Any, str | None]:
    """``(found, value, error)``: the final-answer tool's input if called, else the text
    parsed as JSON. ``found`` is False when the message holds neither a call nor any text."""
    for b in blocks:
        if isinstance(b, ToolUse) and b.name == OUTPUT_TOOL:
            if not isinstance(b.input, dict):
                return True, None, (f"$: the {OUTPUT_TOOL} input is not a JSON object (it "
                                    "was cut off, or is not JSON)")
            return True, b.input, None
    text = "\n".join(b.text for b in blocks if isinstance(b, Text) and b.text)
    if not text.strip():
        return False, None, "$: the answer is empty: give it as one JSON object"
    try:
        return True, parse_text(text), None
    except ValueError as e:
        return True, None, f"$: the answer is not JSON ({e})"


def check_answer(output: OutputType, blocks: list[Any]) -> AnswerCheck:
    """Whether a final message of a typed agent fits its output type, and the value if so."""
    _found, value, error = candidate(blocks)
    if error is not None:
        return AnswerCheck(error=error)
    try:
        value = loosen(value, output.schema)
        found = problems(value, output.schema)
    except RecursionError:  # a value nested deeper than Python's stack
        return AnswerCheck(error="$: the answer is nested too deeply to be checked")
    if found:
        return AnswerCheck(error="\n".join(str(p) for p in found))
    return AnswerCheck(value=value)


async def check_answer_off_loop(output: OutputType, blocks: list[Any]) -> AnswerCheck:
    """``check_answer``, in a worker thread when the output type has a ``pattern``: a match over the
    model's text is bounded and releases the GIL, so it stalls no other agent on the Trio
    thread (decision 0309); a schema without one is judged here."""
    if not output.patterned:
        return check_answer(output, blocks)
    import trio  # (here: the pure part of typed answers never loads Trio)

    return await trio.to_thread.run_sync(check_answer, output, blocks, abandon_on_cancel=True)


def retry_text(output: OutputType, error: str, left: int, mode: str) -> str:
    """What the model is told when its answer does not fit: the problems, and how to answer.
    Factual, in the harness's voice (recorded as harness steering or as the tool's error)."""
    how = (f"Call {OUTPUT_TOOL} again with a corrected answer" if mode == "tool" else
           "Answer again with one corrected JSON object")
    tries = "1 more try" if left == 1 else f"{left} more tries"
    return (f"The answer does not fit the output type {output.name}:\n{error}\n"
            f"{how}; {tries} left.")


# kept one release (docs/changelog-names.md)
Verdict = AnswerCheck
judge = check_answer
judge_off_loop = check_answer_off_loop
