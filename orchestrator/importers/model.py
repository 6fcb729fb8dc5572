"""The value every importer returns: one recorded session as a provider-neutral :class:`Trajectory`.

It lives apart from the readers so that the replay driver, the invariant check and each format
depend on one small definition, and on nothing that reads files.

``Trajectory(system, steps, source_format, name, children, parent_call, dropped, unanswered,
skipped, skipped_lines)``

* ``system`` -- the system prompt, or ``None``.
* ``steps`` -- a list of :data:`Step`, a tagged union (tag field ``kind``):

  - ``UserStep(text, synthetic=False)`` (``"user"``) opens a user turn. ``synthetic`` is true only
    for the one factual line an importer writes itself (:data:`OPENS_WITH_ASSISTANT`).
  - ``AssistantStep(blocks, stop_reason, model, usage)`` (``"assistant"``) is one assistant turn;
    ``blocks`` are ``session.records`` blocks (``Text``, ``Thinking``, ``ToolUse``, ``Opaque``);
    ``usage`` is what the recording reported, if anything (``input_tokens`` uncached only).
  - ``ToolStep(results)`` (``"tool"``) answers the previous assistant turn's calls.
  - ``RewindStep(to_step)`` (``"rewind"``) withdraws every step after index ``to_step`` of
    ``steps``; ``-1`` withdraws everything. Only Claude Code files produce it.

* ``source_format`` -- one of the format names; ``name`` -- the session id, agent id or file stem.
* ``children`` -- sidechains (Claude Code subagents), each a Trajectory to import as a ``fresh``
  child; ``parent_call`` is the id of the parent's call that started it, when recorded.
* ``dropped`` -- tool results with no call to answer (or a second answer to one call), and repeated
  call ids within one message, left out; ``unanswered`` -- calls given :data:`NO_RESULT`;
  ``skipped`` -- counts of record kinds read past, by kind.
* ``skipped_lines`` -- every line (or tail of a line) of the file that held no JSON object and was
  left out, as :class:`SkippedLine`; a child read from its own file carries its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

import msgspec

from ...session.records import Block, ToolResult, Usage
from ...errors import UserError

NO_RESULT = "no result was recorded for this call"
OPENS_WITH_ASSISTANT = "The recording opens with an assistant turn; no user prompt was recorded before it."


class _Step(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True):
    pass


class UserStep(_Step, tag="user", frozen=True):
    """Opens a user turn."""

    text: str
    synthetic: bool = False


class AssistantStep(_Step, tag="assistant", frozen=True):
    """One assistant turn: its blocks in order, and what the recording said about it."""

    blocks: list[Block]
    stop_reason: str | None = None
    model: str | None = None
    usage: Usage | None = None


class ToolStep(_Step, tag="tool", frozen=True):
    """Results answering the previous assistant turn's calls."""

    results: list[ToolResult]


class RewindStep(_Step, tag="rewind", frozen=True):
    """Withdraw every step after index ``to_step`` (``-1``: every step)."""

    to_step: int


Step = Union[UserStep, AssistantStep, ToolStep, RewindStep]


class SkippedLine(msgspec.Struct, frozen=True, kw_only=True):
    """A line of a recording that gave nothing to import, so that a report can name it.

    ``line`` is 1-based, or ``0`` for a whole file left out (a subagent file with nothing to import);
    ``path`` is the file as it was given to the importer (a subagent's own file for a child read
    from one); ``reason`` is one short phrase, for example ``"not JSON"``.
    """

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class Trajectory(msgspec.Struct, kw_only=True):
    """One recorded session, provider-neutral; see the module docstring."""

    system: str | None
    steps: list[Step]
    source_format: str
    name: str | None = None
    children: list["Trajectory"] = []
    parent_call: str | None = None
    dropped: int = 0
    unanswered: int = 0
    skipped: dict[str, int] = {}
    skipped_lines: list[SkippedLine] = []


class TrajectoryFormatError(UserError, ValueError):
    """A file that no importer can read, or that breaks its format; the message is one line."""

    def __init__(self, path: str | Path, reason: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


def every_skipped_line(trajectory: Trajectory) -> list[SkippedLine]:
    """The skipped lines of ``trajectory`` and of its children, each file's once, in reading order."""
    out: list[SkippedLine] = []
    stack = [trajectory]
    while stack:
        t = stack.pop()
        out.extend(t.skipped_lines)
        stack.extend(reversed(t.children))
    return out
