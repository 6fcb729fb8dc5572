"""The engines: how a job's turns are run — ``local``, ``dask``, ``batch`` — behind one shape.

``engine_for(name, job)`` chooses once; the job machinery (``jobs.build.prepare``) and the fronts
(``mnemon run``, the service's jobs) then ask the chosen ``Engine`` its few questions (check the
job, adjust its settings, attach to the provider, run, what it adds to the summary) and never
its name. ``base`` is the shape, each other module one engine; an engine's module is imported
only when it is chosen (the batch engine needs the HTTP client, the Dask engine's driver Dask).

Who imports what: ``base`` is imported by the job machinery; this package's ``engine_for`` by
``jobs.build`` and the fronts; the Dask driver (``jobs.spread``) stays above ``prepare`` and is
called by the front when an engine is not ``in_process`` (decision 0335).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Engine

if TYPE_CHECKING:
    from ..jobs.spec import Job

__all__ = ["Engine", "ENGINES", "engine_for"]

#: the engines ``mnemon run --engine`` offers, the default first
ENGINES = ("local", "dask", "batch")


def engine_for(name: "str | Engine | None", job: "Job | None" = None) -> Engine:
    """The engine called ``name``; with no name, the job's own choice — ``[provider] batch =
    true`` is the batch engine, anything else the local one. An ``Engine`` is returned as it is
    (a caller that chose already). ``ValueError`` for a name that is not an engine."""
    if isinstance(name, Engine):
        return name
    if name is None:
        name = "batch" if job is not None and job.spec.provider.batch else "local"
    if name == "local":
        from .local import LocalEngine

        return LocalEngine()
    if name == "batch":  # imported only then: it needs the HTTP client
        from .batch import BatchEngine

        return BatchEngine()
    if name == "dask":
        from .dask import DaskEngine

        return DaskEngine()
    raise ValueError(f"no engine {name!r} (engines: {', '.join(ENGINES)})")
