"""A real OTLP/HTTP traces receiver on loopback, for the tests: it decodes what it is sent —
protobuf with ``opentelemetry-proto``, or OTLP/JSON — into OTLP/JSON-shaped spans (hex ids),
so a test reads exactly what a collector would have stored."""

from __future__ import annotations

import base64
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _hex(b64: str) -> str:
    return base64.b64decode(b64).hex()


def decode_protobuf(body: bytes) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in protobuf, as OTLP/JSON (ids in hex, as OTLP/JSON
    has them, not protobuf-JSON's base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest)

    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    d = MessageToDict(req)
    for rs in d.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in s:
                        s[k] = _hex(s[k])
                for ln in s.get("links", []):
                    ln["traceId"], ln["spanId"] = _hex(ln["traceId"]), _hex(ln["spanId"])
    return d


def value_of(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [value_of(x) for x in v["arrayValue"].get("values", [])]
    return None


def attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {a["key"]: value_of(a["value"]) for a in items or []}


class Receiver:
    """``with Receiver() as r:`` — ``r.url`` to send to; ``r.spans`` every span received;
    ``r.requests`` the content types seen; ``status`` what it answers (200, or a refusal)."""

    def __init__(self, status: int = 200):
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # every body as it came, gzip undone: what a backend stores
        self.requests: list[str] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ctype = self.headers.get("Content-Type", "")
                with owner._lock:
                    owner.raw.append(body)
                    owner.requests.append(ctype)
                    owner.paths.append(self.path)
                    owner.headers.append(dict(self.headers))
                    if owner.status == 200:
                        owner.bodies.append(decode_protobuf(body) if "protobuf" in ctype
                                            else json.loads(body))
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Receiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def spans(self) -> list[dict[str, Any]]:
        with self._lock:
            return [s for b in self.bodies for rs in b.get("resourceSpans", [])
                    for ss in rs.get("scopeSpans", []) for s in ss.get("spans", [])]

    @property
    def resources(self) -> list[dict[str, Any]]:
        with self._lock:
            return [attrs(rs.get("resource", {}).get("attributes", []))
                    for b in self.bodies for rs in b.get("resourceSpans", [])]
