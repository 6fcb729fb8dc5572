"""The shape every engine answers: what ``prepare`` asks of it, and what its callers ask after.

An engine is how a job's turns are run: here in one Trio loop (``local``), spread over Dask
worker processes (``dask``), or through the providers' batch APIs in waves (``batch``). Each is
one object, chosen once (``engines.engine_for``), and the job machinery asks it the same few
questions in the same order, never its name (decision 0335):

1. ``refuses_options`` — may the run add settings the job file does not hold (``--policy``,
   ``--roles``)? ``ready`` — is its extra installed?
2. ``check(job)`` — a job it cannot run is refused, one line naming the engine, before anything
   is written. ``adjust_job`` and ``adjust`` — the job and its settings as the engine runs them.
3. ``attach`` — the provider its agents call (the batch engine wraps it); ``bind`` — pointed at
   the runner once its supervisor exists.
4. ``run`` — the runner's run. ``progress``, ``summary_extra``, ``summary_line`` and
   ``ended_by`` — what the engine adds to the progress line and the summary, and the error that
   ended its run, for the front (``mnemon run``, the service) to show.

Each default below is what the local engine does: nothing added. Like pydantic-ai's
``durable_exec/{temporal,dbos,prefect}``, an engine overrides only what it changes. This module
imports nothing of the job machinery at run time, so ``jobs.build`` can ask an engine without
depending on the engines that drive ``prepare`` themselves (Dask).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..jobs.runner import JobRunner, JobSummary
    from ..jobs.spec import Job
    from ..settings import Settings


class Engine:
    """One way of running a job's turns (``local``, ``dask``, ``batch``)."""

    #: what ``mnemon run --engine`` calls it
    name: ClassVar[str] = ""
    #: the ``mnemon[…]`` extra it needs beyond the core, if any
    extra: ClassVar[str | None] = None
    #: whether one ``JobRunner`` in this process runs the job (``run``); ``False``: the engine
    #: drives runners elsewhere (the Dask driver, ``jobs.spread.run_job``, which prepares its own
    #: and each chunk's with this engine)
    in_process: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"<engine {self.name}>"

    # ------------------------------------------------------------------ before anything runs

    def ready(self, what: str) -> None:
        """Refuse ``what`` (the command as the user typed it) when the engine's extra is not
        installed: ``extras.MissingExtra``, one line naming ``pip install 'mnemon[…]'``."""
        if self.extra is not None:
            from ..extras import require

            require(self.extra, what)

    def refuses_options(self, *, policy: bool = False, roles: bool = False) -> str | None:
        """Why settings given beside the job file (a ``--policy``, ``--roles``/``--role``)
        cannot be carried to where the engine's agents run, in one line; ``None``: they can.
        A reason, not an error: the front refuses it as its own (the CLI before it imports the
        job machinery, ``prepare`` as a ``JobError``)."""
        return None

    def check(self, job: "Job") -> None:
        """Refuse a job this engine cannot run (``JobError``, one line naming the engine and
        what to use instead), before anything is written."""

    def adjust_job(self, job: "Job", tasks: list) -> "Job":
        """The job as this engine runs it (its settings are built from this one)."""
        return job

    def adjust(self, settings: "Settings", job: "Job", tasks: list) -> "Settings":
        """The job's settings, with the run's own (``--policy``, ``--roles``) already in, as this
        engine runs them; may refuse them as ``check`` does."""
        return settings

    def attach(self, provider: Any, root: Path, job: "Job") -> Any:
        """The provider the job's agents call, given the one the job names and its run root."""
        return provider

    def bind(self, provider: Any, runner: "JobRunner") -> None:
        """Point what ``attach`` made at the runner, once its supervisor exists."""

    # ------------------------------------------------------------------ the run

    async def run(self, runner: "JobRunner", provider: Any) -> "JobSummary":
        """The runner's run to its end: every task that is not final."""
        return await runner.run()

    def progress(self, provider: Any) -> str:
        """What this engine adds after the progress line (``""``: nothing)."""
        return ""

    def ended_by(self, exc: BaseException) -> BaseException | None:
        """The engine's own error that ended the run (a server without batch routes, say),
        however deep in exception groups; ``None``: ``exc`` is not the engine's to explain."""
        return None

    def summary_extra(self, provider: Any, root: Path) -> dict[str, Any]:
        """What ``--json`` adds to the summary under this engine."""
        return {}

    def summary_line(self, extra: dict[str, Any]) -> str | None:
        """The line printed under the summary table (``extra`` as ``summary_extra`` gave it, or
        the Dask driver's summary); ``None``: no line."""
        return None
