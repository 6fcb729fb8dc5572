"""``mnemon run JOB.toml --engine local`` (the default): one process, one Trio loop, every task's
agents under one supervisor (``jobs.runner.JobRunner``).

The local engine adds nothing: it is ``Engine`` with every default, the baseline the other
engines change one step of.
"""

from __future__ import annotations

from .base import Engine


class LocalEngine(Engine):
    """Run the job here: ``JobRunner.run`` with the job's own settings and provider."""

    name = "local"
