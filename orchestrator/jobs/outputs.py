"""A job's output types: ``[agent] output`` and ``[synod] output`` (default: the agent's),
loaded relative to the job file and checked against its provider before anything runs — a
refusal is a ``JobError`` naming the job file, the line and the reason."""

from __future__ import annotations

from ...providers.typed import OutputType
from ..typed.load import OutputError, check_for, load_output
from .spec import Job, JobError, _line

__all__ = ["outputs_for"]


def outputs_for(job: Job) -> tuple[OutputType | None, OutputType | None]:
    """``(the agent's output type, the synod children's)``; None where untyped."""
    spec = job.spec
    retries = spec.agent.output_retries
    agent = _load(job, spec.agent.output, ("agent", "output"), retries)
    synod = agent
    if spec.synod is not None and spec.synod.output is not None:
        synod = _load(job, spec.synod.output, ("synod", "output"), retries)
    return agent, synod


def _load(job: Job, ref: str | None, key: tuple[str, str], retries: int) -> OutputType | None:
    if ref is None:
        return None
    where = f"{job.path}:{_line(job.text, key) or '?'}: [{key[0]}] output"
    try:
        output = load_output(ref, base=job.folder, retries=retries, where=where)
        check_for(output, job.spec.provider.name, where=where)
    except OutputError as e:
        raise JobError(str(e)) from None
    return output
