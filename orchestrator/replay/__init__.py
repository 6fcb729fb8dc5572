"""Replay: recorded agent trajectories driven through the live harness, under our context
strategies and the peers', with the cost, cache and recoverability figures of each
(``mnemon replay``; docs/replay.md).

The package is a layer on top of the agent core — it runs the real supervisor and loop, and its
``evict``/``sweep`` strategies weigh with ``orchestrator.weighing`` exactly as a live agent
does — and it is a DAG inside: ``result`` (the figures) ← ``cursor`` (an agent's place in its
recording), ``handle`` (what a strategy works with) ← ``strategies`` ← ``run`` (the replay
provider, tools and policy; ``replay``) ; ``report`` (CSV, JSON, plot, table) reads results.

Names load on first use: ``from mnemon.orchestrator.replay import replay, summary_table,
write_reports``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "Cursor": ".cursor",
    "Handle": ".handle",
    "Replay": ".run",
    "ReplayPolicy": ".run",
    "Result": ".result",
    "TurnRow": ".result",
    "plot_results": ".report",
    "replay": ".run",
    "summary_table": ".report",
    "write_reports": ".report",
})

if TYPE_CHECKING:
    from .cursor import Cursor
    from .handle import Handle
    from .report import plot_results, summary_table, write_reports
    from .result import Result, TurnRow
    from .run import Replay, ReplayPolicy, replay
