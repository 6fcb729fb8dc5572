"""``mnemon run JOB.toml --engine dask``: a job's root tasks spread over Dask worker processes.

The driver and every chunk prepare an ordinary local runner (``jobs.build.prepare`` with this
engine): the Dask engine changes none of ``prepare``'s steps. What it changes is who runs the
runners — ``jobs.spread.run_job``, the driver, which sits above ``prepare`` because it calls it
(for itself, then once per chunk on a worker); so this face says ``in_process = False`` and the
front calls the driver (decision 0335). Dask is imported only by the driver: the core install
has no Dask, and ``ready`` refuses in one line naming the extra.
"""

from __future__ import annotations

from typing import Any

from .base import Engine


class DaskEngine(Engine):
    """Root tasks spread over Dask worker processes; each chunk a local runner."""

    name = "dask"
    extra = "dask"
    in_process = False

    def refuses_options(self, *, policy: bool = False, roles: bool = False) -> str | None:
        """The chunks build their settings from the job file alone (the driver sends them the
        job, not the command line): a ``--policy`` or ``--roles`` would not reach them."""
        if policy:
            return ("--policy is for --engine local; with dask, give the job a [policy] "
                    "(docs/policy.md)")
        if roles:
            return ("--roles and --role are for --engine local; with dask, give the job "
                    "[roles.NAME] and [agent] role (docs/roles.md)")
        return None

    def summary_line(self, extra: dict[str, Any]) -> str | None:
        return f"engine: dask, {extra['chunks']} chunks on {extra['workers']} worker(s)"
