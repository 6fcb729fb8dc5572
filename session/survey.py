"""The survey of an agent's context: its frontier (turns and residues, with their sizes), the
history's bytes and the tokens in use — what ``mnemon context`` prints and the MCP door's
``context_survey`` answers.

Below the CLI and the MCP door alike, so neither imports the other (``tests/test_knots.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import Turn
from .render import residue_message

if TYPE_CHECKING:
    from .context import Context

__all__ = ["survey"]


def survey(ctx: "Context") -> dict:
    frontier = []
    for item in ctx.frontier():
        if isinstance(item, Turn):
            frontier.append({"kind": "turn", "id": item.id, "role": item.role, "bytes": item.bytes})
        else:
            frontier.append({"kind": "residue", "span": list(item.span), "note": item.note,
                             "by": item.by, "bytes": len(residue_message(ctx, item).encode())})
    return {"frontier": frontier, "history_bytes": ctx.history_bytes(),
            "used_tokens": ctx.used_tokens()}
