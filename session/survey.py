"""The survey of a context: what its table says, read by every surface that shows it.

The model's ``context_survey`` tool, ``mnemon context``, ``GET /v1/agents/{id}/context``, the MCP
server's ``context_survey`` and chat's ``/context`` all show the same table; each used to build
its own, with two spellings of a frontier item. This is the one builder, pure over a ``Context``
(what needs no live agent: no settings, no prices, no growth meter). The live tool adds its live
parts (the eviction plan, large blocks, the sweep gate, candidates) on top (decision 0341).

A frontier item is tagged by ``kind`` — one shape per kind, so a reader switches on one key:

- ``{"kind": "turn", "id", "role", "bytes", "label"}``
- ``{"kind": "residue", "span": [from, to], "note", "by", "bytes"}`` — ``bytes`` the residue
  message the model is sent in its place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .render import residue_message
from .turn import Turn

if TYPE_CHECKING:
    from .context import Context

__all__ = ["frontier_items", "survey"]


def frontier_items(ctx: "Context") -> list[dict[str, Any]]:
    """The frontier, in order, one dict per turn or residue."""
    out: list[dict[str, Any]] = []
    for item in ctx.frontier():
        if isinstance(item, Turn):
            out.append({"kind": "turn", "id": item.id, "role": item.role, "bytes": item.bytes,
                        "label": item.label})
        else:
            out.append({"kind": "residue", "span": list(item.span), "note": item.note,
                        "by": item.by, "bytes": len(residue_message(ctx, item).encode())})
    return out


def survey(ctx: "Context", tokens_per_byte: float | None = None) -> dict[str, Any]:
    """The context's frontier, history bytes, used tokens (at ``tokens_per_byte``, else the
    ratio the log measured), pending marks and the window its log was started with."""
    started = ctx.started
    return {
        "frontier": frontier_items(ctx),
        "history_bytes": ctx.history_bytes(),
        "used_tokens": ctx.used_tokens(tokens_per_byte),
        "marks": [{"block": f"{k[0]}.{k[1]}", "replacement_bytes": len(v.encode())}
                  for k, v in sorted(ctx.marks.items())],
        "context_window": started.context_window if started else None,
    }
