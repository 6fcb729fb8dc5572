"""Whether a run is traced live, and turning it on for the length of a command.

Tracing is on when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``), unless ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER``
is ``none`` — the SDK's own variables, so a process set up for OpenTelemetry is set up for
mnemon. Off, the records' tap stays None (one test per record) and nothing of the tracing
beyond this module is imported. On, every agent log's records reach a ``tap.LiveTracer`` whose
spans ``ship.Shipper`` sends over OTLP/HTTP (decision 0293: no SDK on the run's path).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ...session.agentlog import AgentLog
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


@contextmanager
def live_tracing(content: bool = False, *, carry: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """Trace every agent log written in this process while the block runs; yields the tracer,
    or None when tracing is off. ``carry`` (from ``carried``) sets the job's variables that the
    worker's environment lacks, then applies. A variable that asks for what cannot be done
    (gRPC) is one warning line, and the run goes on untraced."""
    if carry is not None:
        for k, v in carry.get("env", {}).items():
            os.environ.setdefault(k, v)
        content = content or bool(carry.get("content"))
    if not wanted():
        yield None
        return
    from .ship import ConfigError, Shipper  # only once tracing is on: the cost of being off
    from .tap import LiveTracer

    try:
        sink = Shipper.from_env()
    except ConfigError as e:
        sys.stderr.write(f"mnemon: traces: {e}; this run is not traced\n")
        yield None
        return
    tracer = LiveTracer(sink, content=content)
    try:
        with traced_by(tracer):
            yield tracer
    finally:
        tracer.close()


@contextmanager
def traced_by(tracer: Any) -> Iterator[Any]:
    """Every record appended in this process, while the block runs, goes to
    ``tracer.tap(agent_log, record, locus)`` — a ``tap.LiveTracer`` over any sink (the
    Shipper; ``live.SdkSink`` over an SDK span processor: a program's own pipeline, a test's
    in-memory exporter)."""
    previous = AgentLog.__dict__["tap"]
    AgentLog.tap = staticmethod(tracer.tap)  # any callable: not bound to the log it is read on
    try:
        yield tracer
    finally:
        AgentLog.tap = previous
