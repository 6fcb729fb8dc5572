"""Typed answers, the orchestrator's part: loading output types (``load``: a schema file, a
dict, ``module:Type``, a Python type) and checking them against the provider; checking an
answer and wording a retry (``answer``); the loop's hook (``turn``); the field-wise vote of a
typed synod (``vote``). The pure schema logic is ``providers.typed``. See
docs/orchestrator.md, "Typed answers"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "OutputError": ".load",
    "as_output_type": ".load",
    "check_for": ".load",
    "from_python": ".load",
    "load_output": ".load",
    "AnswerCheck": ".answer",
    "check_answer": ".answer",
    "Verdict": ".answer",  # kept one release: AnswerCheck
    "judge": ".answer",  # kept one release: check_answer
    "FieldVote": ".vote",
    "vote_fields": ".vote",
})

if TYPE_CHECKING:
    from .answer import AnswerCheck, Verdict, check_answer, judge
    from .load import OutputError, as_output_type, check_for, from_python, load_output
    from .vote import FieldVote, vote_fields
