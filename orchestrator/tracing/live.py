"""Live traces: every record an agent appends, as it is appended, through the builder and out
through the OpenTelemetry SDK's batch processor and OTLP/HTTP exporter (the ``otel`` extra).

Imported only once tracing is on (``switch``). The spans are the builder's — the same as
``mnemon trace`` makes later from the logs, ids included — handed to the SDK as finished
``ReadableSpan`` values: the SDK's tracer, which mints random ids, is not used. The exporter is
configured by the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_HEADERS``,
``…_TIMEOUT``, ``…_COMPRESSION``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, the batch
processor's ``OTEL_BSP_*``).

Faults never reach the run: a receiver that cannot be reached or refuses costs one warning line
on stderr; the spans of the batches that failed (and of those sent while it stays down) are
dropped and counted, and the count is one more line when the tracer closes. The SDK's own log
lines are silenced, so those two lines are all a user sees.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, SpanExporter, SpanExportResult,
                                            SpanProcessor)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ..._about import __version__
from ...lineage.runroot import read_run_json
from ...session.records import SessionStarted
from . import ids, otlp, semconv
from .build import TraceBuilder
from .spans import Span

__all__ = ["LiveTracer", "CountingExporter", "readable"]

#: how long closing waits for the last spans to go before it stops a failing exporter's retries
GRACE_S = 2.0
#: after a failed export, batches are dropped (not tried) for this long: a dead receiver does
#: not cost the exporter's timeout on every batch
QUIET_S = 30.0

_KINDS = {semconv.INTERNAL: trace_api.SpanKind.INTERNAL, semconv.CLIENT: trace_api.SpanKind.CLIENT}
_STATUS = {0: trace_api.StatusCode.UNSET, 1: trace_api.StatusCode.OK,
           2: trace_api.StatusCode.ERROR}
_SCOPE = InstrumentationScope(semconv.SCOPE, __version__, semconv.SCHEMA_URL)
_FLAGS = trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED)


def _context(trace_id: str, span_id: str) -> trace_api.SpanContext:
    return trace_api.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False,
                                 trace_flags=_FLAGS)


def readable(span: Span, resource: Resource) -> ReadableSpan:
    """A builder span as the SDK's finished span."""
    status = trace_api.Status(_STATUS[span.status],
                              span.status_message or None if span.status == 2 else None)
    return ReadableSpan(
        name=span.name, context=_context(span.trace_id, span.span_id),
        parent=(_context(span.trace_id, span.parent_id) if span.parent_id else None),
        resource=resource, attributes=span.attributes,
        events=[OtelEvent(e.name, e.attributes, e.time_ns) for e in span.events],
        links=[trace_api.Link(_context(ln.trace_id, ln.span_id), ln.attributes)
               for ln in span.links],
        kind=_KINDS.get(span.kind, trace_api.SpanKind.INTERNAL), status=status,
        start_time=span.start_ns, end_time=span.end_ns, instrumentation_scope=_SCOPE)


class CountingExporter(SpanExporter):
    """Wraps the real exporter: counts what it could not deliver, says so once, and rests a
    while after a failure instead of waiting on a dead receiver for every batch."""

    def __init__(self, inner: SpanExporter, *, where: str = "", warn=None):
        self.inner = inner
        self.where = where
        self.exported = 0
        self.dropped = 0
        self._resting_until = 0.0
        self._warned = False
        self._closed = False
        self._warn = warn or (lambda line: sys.stderr.write(line + "\n"))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if time.monotonic() < self._resting_until:
            self.dropped += len(spans)
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception as e:  # an exporter's bug is not the run's
            result = SpanExportResult.FAILURE
            why = f"{type(e).__name__}: {e}"
        else:
            why = "no answer, or a refusal"
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            return result
        self.dropped += len(spans)
        self._resting_until = time.monotonic() + QUIET_S
        if not self._warned:
            self._warned = True
            self._warn(f"mnemon: traces: could not send spans to {self.where or 'the endpoint'}"
                       f" ({why}); dropping spans while it is down, the run goes on")
        return result

    def shutdown(self) -> None:
        if not self._closed:
            self._closed = True
            self.inner.shutdown()

    def abort(self) -> None:
        """Stop waiting between retries (the exporter's shutdown does that): a failing
        receiver at the end of a run must not hold the command for the exporter's timeout."""
        self.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _quiet_sdk() -> None:
    """The SDK logs each failed export (with a traceback) through ``logging``: our one warning
    line says it instead."""
    for name in ("opentelemetry", "urllib3"):
        lg = logging.getLogger(name)
        lg.addHandler(logging.NullHandler())
        lg.propagate = False
        lg.setLevel(logging.CRITICAL + 1)


class LiveTracer:
    """The records' tap (``AgentLog.tap``): one builder per run root met, each record fed as
    it is appended, finished spans handed to ``processor``."""

    def __init__(self, processor: SpanProcessor, *, content: bool = False,
                 latest_only: bool | None = None, exporter: CountingExporter | None = None,
                 resource: Resource | None = None):
        self.processor = processor
        self.content = content
        self.latest_only = semconv.latest_only() if latest_only is None else latest_only
        self.exporter = exporter
        self.resource = resource or Resource.create(otlp.resource_attributes())
        self.runs: dict[Path, TraceBuilder] = {}
        self.spans = 0
        self.faults = 0
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, *, content: bool = False) -> "LiveTracer":
        """The exporter and processor the standard variables describe."""
        _quiet_sdk()
        where = next((os.environ[k] for k in otlp.ENDPOINTS if os.environ.get(k)), "")
        exporter = CountingExporter(OTLPSpanExporter(), where=where)
        return cls(BatchSpanProcessor(exporter), content=content, exporter=exporter)

    def _builder(self, alog: Any) -> TraceBuilder:
        root = Path(alog.path).parents[2]
        b = self.runs.get(root)
        if b is None:
            b = TraceBuilder(ids.run_key(read_run_json(root)), content=self.content,
                             latest_only=self.latest_only)
            self.runs[root] = b
        return b

    def tap(self, alog: Any, record: Any, locus: Any) -> None:
        """``AgentLog.tap``: never raises into the agent's append."""
        try:
            with self._lock:
                b = self._builder(alog)
                agent = Path(alog.path).parent.name
                if agent not in b.agents:
                    started = record if isinstance(record, SessionStarted) else alog.ctx.started
                    b.meet(agent, started)
                done = b.feed(agent, record, locus[1])
            self._emit(done)
        except Exception as e:  # a trace must never fail a run
            self.faults += 1
            if self.faults == 1:
                sys.stderr.write(f"mnemon: traces: a record could not be traced "
                                 f"({type(e).__name__}: {e}); the run goes on\n")

    def _emit(self, spans: list[Span]) -> None:
        for s in spans:
            self.processor.on_end(readable(s, self.resource))
        self.spans += len(spans)

    def close(self) -> None:
        """End what is still open (agents of a stopped service), send everything, and say how
        many spans were dropped, if any."""
        with self._lock:
            rest = [s for b in self.runs.values() for s in b.finish()]
        try:
            self._emit(rest)
            closing = threading.Thread(target=self.processor.shutdown, name="mnemon-traces")
            closing.start()
            closing.join(GRACE_S)
            if closing.is_alive() and self.exporter is not None:
                self.exporter.abort()  # a receiver that keeps failing: its retries end now
            closing.join()
        except Exception as e:
            sys.stderr.write(f"mnemon: traces: {type(e).__name__}: {e}\n")
        if self.exporter is not None and self.exporter.dropped:
            sys.stderr.write(f"mnemon: traces: {self.exporter.dropped} of "
                             f"{self.exporter.dropped + self.exporter.exported} spans dropped "
                             f"(the receiver was not reachable)\n")
