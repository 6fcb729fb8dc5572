"""Whether a run is traced live, and turning it on for the length of a command.

Tracing is on when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``), unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER``
is ``none`` — the SDK's own variables, so a process set up for OpenTelemetry is set up for
mnemon. Off, nothing of OpenTelemetry is imported and the records' tap stays None: one test per
record. On, ``live`` (the ``otel`` extra) is imported and every agent log's records reach it.

An endpoint set without the extra installed: one warning line and the run goes on untraced
(the variable may be set for other programs); ``--trace-content`` asked without the extra is
refused like any surface whose extra is missing (decision 0293).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ...session.agentlog import AgentLog
from ..extras import missing, require
from .otlp import ENDPOINTS
#: the variables a Dask chunk is given from its driver, so a worker started elsewhere exports
#: where the driver would (``carried``)
CARRIED_PREFIX = "OTEL_"


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(k) for k in ENDPOINTS)


def carried(content: bool = False) -> dict[str, Any]:
    """What a Dask chunk carries of its job's tracing: the OpenTelemetry variables of the
    driver's environment and ``--trace-content``. The ids need nothing more: they are derived
    from the run root every worker shares, so a task's spans are the same whichever worker
    runs it, or runs it again."""
    return {"env": {k: v for k, v in os.environ.items() if k.startswith(CARRIED_PREFIX)},
            "content": content}


def check(content: bool) -> None:
    """Refuse ``--trace-content`` on a traced run without the ``otel`` extra — before anything
    is written, as every surface whose extra is missing is refused."""
    if content and wanted():
        require("otel", "--trace-content")


@contextmanager
def live_tracing(content: bool = False, *, carry: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """Trace every agent log written in this process while the block runs; yields the tracer,
    or None when tracing is off. ``carry`` (from ``carried``) sets the job's variables that the
    worker's environment lacks, then applies."""
    if carry is not None:
        for k, v in carry.get("env", {}).items():
            os.environ.setdefault(k, v)
        content = content or bool(carry.get("content"))
    if not wanted():
        yield None
        return
    if missing("otel"):
        if content:
            require("otel", "--trace-content")
        sys.stderr.write("mnemon: an OTLP endpoint is set but traces need the otel extra: "
                         "pip install 'mnemon[otel]'; this run is not traced\n")
        yield None
        return
    from . import live  # the otel extra, imported only now that tracing is on

    tracer = live.LiveTracer.from_env(content=content)
    try:
        with traced_by(tracer):
            yield tracer
    finally:
        tracer.close()


@contextmanager
def traced_by(tracer: Any) -> Iterator[Any]:
    """Every record appended in this process, while the block runs, goes to
    ``tracer.tap(agent_log, record, locus)`` — a ``live.LiveTracer`` over any span processor
    (a library's own SDK set-up, a test's in-memory exporter)."""
    previous = AgentLog.tap
    AgentLog.tap = tracer.tap
    try:
        yield tracer
    finally:
        AgentLog.tap = previous
