"""One agent's log, its context table, eviction, and the transcript door."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from .._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "AgentLog": ".agentlog",
    "AncestorUnreadable": ".errors",
    "BlockRef": ".blocks",
    "Candidate": ".sweep",
    "Context": ".context",
    "DigestMismatch": ".errors",
    "Door": ".door",
    "Gate": ".sweep",
    "LogClosed": ".errors",
    "LogCorrupt": ".errors",
    "LogRefused": ".errors",
    "PressureLatch": ".eviction",
    "RecordLog": ".log",
    "Refusal": ".errors",
    "ResidueEntry": ".turn",
    "SessionError": ".errors",
    "Turn": ".turn",
    "candidates": ".sweep",
    "digest": ".log",
    "eviction_due": ".eviction",
    "fold_file": ".resume",
    "gate": ".sweep",
    "iter_lines": ".log",
    "plan_eviction": ".eviction",
    "pressure_reminder": ".eviction",
    "read_at": ".log",
    "read_span": ".log",
    "render": ".render",
    "residue_message": ".render",
    "scan": ".log",
    "turn_blocks": ".blocks",
})

if TYPE_CHECKING:
    from .agentlog import AgentLog
    from .blocks import BlockRef, turn_blocks
    from .context import Context
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
    from .turn import ResidueEntry, Turn
