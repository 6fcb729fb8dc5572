"""The OpenTelemetry SDK's side of live traces (the ``otel`` extra): mnemon's spans handed to
any SDK span processor — a program's own ``TracerProvider`` pipeline (its exporters, gRPC
included), or the SDK's in-memory exporter in a test — as finished ``ReadableSpan`` values::

    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from mnemon.orchestrator.tracing.live import SdkSink
    from mnemon.orchestrator.tracing.tap import LiveTracer
    from mnemon.orchestrator.tracing.switch import traced_by

    tracer = LiveTracer(SdkSink(BatchSpanProcessor(my_exporter)))
    with traced_by(tracer):
        ...  # every agent log written here is traced
    tracer.close()

The SDK's tracer, which mints random ids, is not used: the ids are mnemon's, derived from the
run (``ids``). The commands do not need this module: they send with ``ship.Shipper``.
"""

from __future__ import annotations

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ..._about import __version__
from . import otlp, semconv
from .spans import Span

__all__ = ["SdkSink", "readable"]

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
                              (span.status_message or None) if span.status == 2 else None)
    return ReadableSpan(
        name=span.name, context=_context(span.trace_id, span.span_id),
        parent=(_context(span.trace_id, span.parent_id) if span.parent_id else None),
        resource=resource, attributes=span.attributes,
        events=[OtelEvent(e.name, e.attributes, e.time_ns) for e in span.events],
        links=[trace_api.Link(_context(ln.trace_id, ln.span_id), ln.attributes)
               for ln in span.links],
        kind=_KINDS.get(span.kind, trace_api.SpanKind.INTERNAL), status=status,
        start_time=span.start_ns, end_time=span.end_ns, instrumentation_scope=_SCOPE)


class SdkSink:
    """A ``tap.Sink`` over an SDK span processor; ``close`` shuts the processor down."""

    def __init__(self, processor: SpanProcessor, resource: Resource | None = None):
        self.processor = processor
        self.resource = resource or Resource.create(otlp.resource_attributes())
        self.exported = 0
        self.dropped = 0

    def add(self, spans: list[Span]) -> None:
        for s in spans:
            self.processor.on_end(readable(s, self.resource))
        self.exported += len(spans)

    def close(self) -> None:
        self.processor.shutdown()
