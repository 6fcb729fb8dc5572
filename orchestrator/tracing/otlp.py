"""Spans as OTLP/JSON: the protobuf JSON mapping of an ``ExportTraceServiceRequest``, as the
OTLP specification gives it — trace and span ids as hex (not base64), 64-bit integers and
times as decimal strings, enums (``kind``, ``status.code``) as integers, each attribute
``{"key", "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue"}}``.

Pure. ``send`` posts it (or its protobuf form) to an OTLP/HTTP receiver; ``mnemon trace --json``
prints it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from ..._about import __version__
from . import semconv as sc
from .spans import Span

#: the variables that name the OTLP endpoint, the traces' own first (as the SDK reads them)
ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def value(v: Any) -> dict[str, Any]:
    """One attribute value as OTLP's ``AnyValue``."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": str(v)}


def attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in attrs.items()]


def span_json(s: Span) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": s.trace_id, "spanId": s.span_id, "name": s.name, "kind": s.kind,
        "startTimeUnixNano": str(s.start_ns), "endTimeUnixNano": str(s.end_ns),
        "attributes": attributes(s.attributes),
        "status": {"code": s.status, **({"message": s.status_message}
                                         if s.status_message else {})}}
    if s.parent_id:
        out["parentSpanId"] = s.parent_id
    if s.events:
        out["events"] = [{"timeUnixNano": str(e.time_ns), "name": e.name,
                          "attributes": attributes(e.attributes)} for e in s.events]
    if s.links:
        out["links"] = [{"traceId": ln.trace_id, "spanId": ln.span_id,
                         "attributes": attributes(ln.attributes)} for ln in s.links]
    return out


def resource_attributes(environ: Mapping[str, str] | None = None,
                        extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The resource, as the SDK makes it from the environment: ``OTEL_RESOURCE_ATTRIBUTES``
    (``k=v`` pairs, percent-decoded), then ``OTEL_SERVICE_NAME`` (default ``mnemon``)."""
    env = os.environ if environ is None else environ
    attrs: dict[str, Any] = {}
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        k, eq, v = pair.partition("=")
        if eq and k.strip():
            attrs[unquote(k.strip())] = unquote(v.strip())
    attrs["service.name"] = env.get("OTEL_SERVICE_NAME") or attrs.get("service.name") or "mnemon"
    attrs.setdefault("service.version", __version__)
    attrs.update(extra or {})
    return attrs


def request(spans: Iterable[Span], resource: Mapping[str, Any]) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` holding ``spans`` under one resource and scope."""
    return {"resourceSpans": [{
        "resource": {"attributes": attributes(resource)},
        "scopeSpans": [{"scope": {"name": sc.SCOPE, "version": __version__},
                        "schemaUrl": sc.SCHEMA_URL,
                        "spans": [span_json(s) for s in spans]}],
        "schemaUrl": sc.SCHEMA_URL}]}
