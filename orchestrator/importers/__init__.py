"""Recorded sessions from elsewhere, turned into one provider-neutral :class:`Trajectory`.

A replay driver feeds a Trajectory through the real agent loop; this package only reads files.
It is pure: no Trio, no network, nothing written. The mapping of each format is in
``docs/importers.md``.

One module per concept:

* ``model`` -- the value (:class:`Trajectory`, its steps, :data:`NO_RESULT`, the
  :class:`SkippedLine` records of what a damaged file lost) and :class:`TrajectoryFormatError`;
* ``invariants`` -- :func:`check_invariants`, the guarantees every importer keeps;
* ``lines`` -- reading JSON lines, recovering glued and damaged ones; ``builder`` -- building a step list that keeps the guarantees;
  ``content`` -- recorded content parts as strings;
* ``neutral``, ``claude_code``, ``codex``, ``openai_messages`` -- one format each;
* ``detect`` -- :func:`detect_format`, :func:`load` and :data:`FORMATS`.

The modules import downward in that order and never from the rest of the orchestrator.
"""

from __future__ import annotations

from .claude_code import load_claude_code
from .codex import load_codex
from .detect import FORMATS, detect_format, load
from .invariants import check_invariants
from .model import (
    NO_RESULT,
    OPENS_WITH_ASSISTANT,
    AssistantStep,
    RewindStep,
    SkippedLine,
    Step,
    ToolStep,
    Trajectory,
    TrajectoryFormatError,
    UserStep,
    every_skipped_line,
)
from .neutral import load_neutral
from .openai_messages import load_openai_messages

__all__ = [
    "FORMATS",
    "NO_RESULT",
    "OPENS_WITH_ASSISTANT",
    "AssistantStep",
    "RewindStep",
    "SkippedLine",
    "Step",
    "ToolStep",
    "Trajectory",
    "TrajectoryFormatError",
    "UserStep",
    "check_invariants",
    "detect_format",
    "every_skipped_line",
    "load",
    "load_claude_code",
    "load_codex",
    "load_neutral",
    "load_openai_messages",
]
