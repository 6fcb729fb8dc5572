"""Batch jobs: a TOML job file → one run root and ``results.jsonl``; re-running resumes.

``load_job`` validates the file (``spec``), ``load_tasks`` fills the prompt template for every
row (``tasks``), ``JobRunner`` runs them under one supervisor (``runner``), ``state`` reads what
the run root says about each task, ``results`` reads and writes the results file. ``mnemon run`` (``orchestrator/commands/run.py``) is the front;
``docs/jobs.md`` the reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "Job": ".spec",
    "JobError": ".spec",
    "JobSpec": ".spec",
    "load_job": ".spec",
    "Task": ".tasks",
    "load_tasks": ".tasks",
    "JobRunner": ".runner",
    "JobSummary": ".runner",
    "Result": ".results",
    "read_results": ".results",
    "provider_for": ".build",
    "settings_for": ".build",
    "user_tools_for": ".build",
    "check_manifest": ".state",
})

if TYPE_CHECKING:
    from .build import provider_for, settings_for, user_tools_for
    from .results import Result, read_results
    from .runner import JobRunner, JobSummary
    from .spec import Job, JobError, JobSpec, load_job
    from .state import check_manifest
    from .tasks import Task, load_tasks
