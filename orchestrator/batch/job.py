"""Moved: the batch engine's face is ``orchestrator/engines/batch.py`` (``BatchEngine``).

This module re-exports its functions under their old names for one release
(``docs/changelog-names.md``); new code asks the engine (``engines.engine_for("batch")``).
"""

from __future__ import annotations

from typing import Any

from ..engines import engine_for
from ..engines.batch import (BATCH_PROVIDERS, UNBOUNDED, attach, batch_job,  # noqa: F401
                             batch_settings, bind, check_job, check_roles, progress_extra,
                             route_missing, run_job, summary_extra)

__all__ = ["wants_batch", "check_job", "check_roles", "batch_settings", "batch_job", "attach",
           "bind", "run_job", "summary_extra", "progress_extra", "route_missing",
           "BATCH_PROVIDERS", "UNBOUNDED"]


def wants_batch(job: Any, engine: str | None) -> bool:
    """``--engine batch``, or no ``--engine`` and ``[provider] batch = true``: what
    ``engines.engine_for(engine, job)`` chooses, asked of it."""
    return engine in (None, "batch") and engine_for(engine, job).name == "batch"
