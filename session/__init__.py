"""One agent's log, its context table, eviction, and the transcript door."""

from .agentlog import AgentLog
from .context import BlockRef, Context, ResidueEntry, Turn, turn_blocks
from .door import Door
from .errors import (
    AncestorUnreadable,
    DigestMismatch,
    LogClosed,
    LogCorrupt,
    LogRefused,
    Refusal,
    SessionError,
)
from .eviction import PressureLatch, eviction_due, plan_eviction, pressure_reminder
from .log import RecordLog, digest, iter_lines, read_at, read_span, scan
from .render import render, residue_message
from .resume import fold_file
from .sweep import Candidate, Gate, candidates, gate

__all__ = [
    "AgentLog", "AncestorUnreadable", "BlockRef", "Candidate", "Context", "DigestMismatch",
    "Door", "Gate", "LogClosed", "LogCorrupt", "LogRefused", "PressureLatch", "RecordLog",
    "Refusal", "ResidueEntry", "SessionError", "Turn", "candidates", "digest", "eviction_due",
    "fold_file", "gate", "iter_lines", "plan_eviction", "pressure_reminder", "read_at",
    "read_span", "render", "residue_message", "scan", "turn_blocks",
]
