"""The wire: mnemon's own protobuf encoding of an ``ExportTraceServiceRequest``, checked by
decoding it with ``opentelemetry-proto`` (the ``otel`` extra), and the live sender as the
standard variables configure it."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.tracing import otlp, protobuf
from mnemon.orchestrator.tracing.runlogs import read_run
from mnemon.orchestrator.tracing.ship import ConfigError, Shipper
from mnemon.orchestrator.tracing.spans import Event, Link, Span
from tests.tracing.receiver import Receiver

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from tests.tracing.receiver import decode_protobuf  # noqa: E402

ENUMS = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_CLIENT": 3, "STATUS_CODE_ERROR": 2,
         "STATUS_CODE_OK": 1}


def _normal(span: dict) -> dict:
    """protobuf-JSON's defaults and enum names, as OTLP/JSON writes them."""
    span = dict(span)
    span["kind"] = ENUMS.get(span.get("kind"), span.get("kind", 0))
    status = dict(span.get("status", {}))
    if "code" in status:
        status["code"] = ENUMS.get(status["code"], status["code"])
    if status.get("code", 0) == 0:
        status.pop("code", None)
    span["status"] = status
    return span


def test_the_protobuf_bytes_decode_to_the_otlp_json(demo_root):
    trace = read_run(demo_root, content=True)
    resource = {"service.name": "mnemon", "f": 1.5, "b": True, "n": -3, "l": ["a", "b"]}
    decoded = decode_protobuf(protobuf.request_bytes(trace.spans, resource))
    written = json.loads(json.dumps(otlp.request(trace.spans, resource)))
    assert decoded["resourceSpans"][0]["resource"] == written["resourceSpans"][0]["resource"]
    got = decoded["resourceSpans"][0]["scopeSpans"][0]
    want = written["resourceSpans"][0]["scopeSpans"][0]
    assert got["scope"] == want["scope"] and got["schemaUrl"] == want["schemaUrl"]
    assert [_normal(s) for s in got["spans"]] == [_normal(s) for s in want["spans"]]


def test_every_field_of_a_span_survives_the_wire():
    s = Span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7",
             "chat m", 3, 1_700_000_000_123_456_789, {"a": "x", "i": 2 ** 40, "neg": -1,
                                                     "d": 0.25, "t": False, "l": [1, "y"]})
    s.end_ns = s.start_ns + 5
    s.events.append(Event("e", s.start_ns + 1, {"k": 1}))
    s.links.append(Link("0af7651916cd43dd8448eb211c80319c", "1111111111111111", {"why": "r"}))
    s.fail("Boom", "it broke")
    for _ in range(2):  # the second time from the remembered fields
        span = decode_protobuf(protobuf.request_bytes([s], {}))["resourceSpans"][0][
            "scopeSpans"][0]["spans"][0]
        assert _normal(span) == _normal(json.loads(json.dumps(otlp.span_json(s))))


def test_the_sender_batches_compresses_and_sends_headers(demo_root):
    spans = read_run(demo_root).spans
    with Receiver() as r:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.url + "/custom/path",
               "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t",
               "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "7",
               "OTEL_SERVICE_NAME": "svc"}
        ship = Shipper.from_env(env)
        ship.add(spans)
        ship.close()
    assert set(r.paths) == {"/custom/path"}
    assert len(r.bodies) == -(-len(spans) // 7)
    assert r.headers[0]["authorization"] == "Bearer t"
    assert r.headers[0]["Content-Encoding"] == "gzip"
    assert [s["spanId"] for s in r.spans] == [s.span_id for s in spans]
    assert ship.exported == len(spans) and ship.dropped == 0
    assert r.resources[0]["service.name"] == "svc"


def test_the_sender_speaks_json_when_asked(demo_root):
    spans = read_run(demo_root).spans
    with Receiver() as r:
        ship = Shipper.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": r.url,
                                 "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"})
        ship.add(spans)
        ship.close()
    assert set(r.requests) == {"application/json"}
    assert len(r.spans) == len(spans)


def test_a_full_queue_drops_and_counts():
    lines: list[str] = []
    ship = Shipper("http://127.0.0.1:9/v1/traces", resource={}, headers={}, max_queue=3,
                   delay_s=60, warn=lines.append)
    spans = [Span("1" * 32, f"{i + 1:016x}", None, "s", 1, 0, {}) for i in range(5)]
    ship.add(spans)
    assert ship.dropped == 2
    ship.close()  # the three left cannot be sent either
    assert ship.dropped == 5 and ship.exported == 0
    assert lines[-1].startswith("mnemon: traces: 5 of 5 spans dropped")


@pytest.mark.parametrize(("env", "word"), [
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "gRPC"),
    ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "gzip or none"),
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "not a number"),
])
def test_a_setting_it_cannot_follow_is_named(env, word):
    with pytest.raises(ConfigError, match=word):
        Shipper.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", **env})
