"""Building a step list that keeps the guarantees, whatever order the recording wrote things in.

Every format shares these rules (an assistant-first recording gets one synthetic opening line;
calls and results pair exactly; a user text never falls between a call and its result), so they
are written once here and each format only says what its lines mean.
"""

from __future__ import annotations

import msgspec

from ...session.records import Block, ToolResult, ToolUse, Usage
from .model import (
    NO_RESULT,
    OPENS_WITH_ASSISTANT,
    AssistantStep,
    RewindStep,
    SkippedLine,
    Step,
    ToolStep,
    Trajectory,
    UserStep,
)


class Steps:
    """The step list under construction: writes the opening line when an assistant comes first."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def append(self, step: Step) -> int:
        if not self.steps and not isinstance(step, UserStep) and not isinstance(step, RewindStep):
            self.steps.append(UserStep(text=OPENS_WITH_ASSISTANT, synthetic=True))
        self.steps.append(step)
        return len(self.steps) - 1


class Linear:
    """Builds steps from a recording that is already one line of events (every format but Claude Code).

    A user text that arrives while the turn in hand still has unanswered calls waits until that
    turn's results are written, so results always follow their assistant turn directly.
    """

    def __init__(self) -> None:
        self.out = Steps()
        self.pending: dict[str, bool] = {}  # call id -> answered, in call order
        self.results: list[ToolResult] = []
        self.waiting_users: list[str] = []
        self.last_assistant: int | None = None
        self.dropped = 0
        self.unanswered = 0

    def user(self, text: str) -> None:
        if self.pending and not all(self.pending.values()):
            self.waiting_users.append(text)
            return
        self._close()
        self.out.append(UserStep(text=text))

    def assistant(self, blocks: list[Block], *, stop_reason: str | None, model: str | None = None,
                  usage: Usage | None = None) -> None:
        self._close()
        blocks, repeated = unique_calls(blocks)
        self.dropped += repeated
        self.last_assistant = self.out.append(
            AssistantStep(blocks=blocks, stop_reason=stop_reason, model=model, usage=usage))
        self.pending = {b.id: False for b in blocks if isinstance(b, ToolUse)}

    def result(self, call_id: str, content: str, is_error: bool = False) -> None:
        if self.pending.get(call_id) is False:
            self.pending[call_id] = True
            self.results.append(ToolResult(tool_use_id=call_id, content=content, is_error=is_error))
        else:
            self.dropped += 1

    def set_usage(self, usage: Usage) -> None:
        """Attach usage to the latest assistant turn, if it has none yet."""
        i = self.last_assistant
        if i is not None:
            step = self.out.steps[i]
            assert isinstance(step, AssistantStep)
            if step.usage is None:
                self.out.steps[i] = msgspec.structs.replace(step, usage=usage)

    def _close(self) -> None:
        missing = [call for call, answered in self.pending.items() if not answered]
        self.unanswered += len(missing)
        results = self.results + [ToolResult(tool_use_id=c, content=NO_RESULT, is_error=True) for c in missing]
        if results:
            self.out.append(ToolStep(results=results))
        self.pending, self.results = {}, []
        for text in self.waiting_users:
            self.out.append(UserStep(text=text))
        self.waiting_users = []

    def finish(self, *, system: str | None, source_format: str, name: str | None,
               skipped: dict[str, int], skipped_lines: list[SkippedLine] | None = None) -> Trajectory:
        self._close()
        return Trajectory(system=system, steps=self.out.steps, source_format=source_format, name=name,
                          dropped=self.dropped, unanswered=self.unanswered, skipped=skipped,
                          skipped_lines=list(skipped_lines or []))


def unique_calls(blocks: list[Block]) -> tuple[list[Block], int]:
    """Drop a second call with an id already used in the message (the fold refuses it)."""
    seen: set[str] = set()
    kept: list[Block] = []
    for b in blocks:
        if isinstance(b, ToolUse):
            if b.id in seen:
                continue
            seen.add(b.id)
        kept.append(b)
    return kept, len(blocks) - len(kept)


def bump(counts: dict[str, int], key: str) -> None:
    """Count one more record of kind ``key`` read past (``Trajectory.skipped``)."""
    counts[key] = counts.get(key, 0) + 1
