"""Sending live spans: a batch in a thread, OTLP/HTTP, as the standard variables configure it.

What the SDK's batch span processor and OTLP/HTTP exporter do, for mnemon's own span values and
at a fraction of their cost per span (``protobuf`` encodes one in a few microseconds, against
~36 µs for the SDK's encoder on its ``ReadableSpan``; docs/performance.md, "Traces"), so that
tracing a run costs it little (issue #33's goal: at most a quarter more harness CPU per turn).

The variables, as the OpenTelemetry specification names them: ``OTEL_EXPORTER_OTLP_ENDPOINT``
(``/v1/traces`` added) or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (as it is);
``…_HEADERS``, ``…_TIMEOUT`` (seconds), ``…_COMPRESSION`` (``gzip``), ``…_PROTOCOL``
(``http/protobuf``, the default, or ``http/json``), each with its ``TRACES_`` form first;
``OTEL_BSP_SCHEDULE_DELAY`` (ms), ``OTEL_BSP_MAX_QUEUE_SIZE``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``;
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` for the resource.

Faults never reach the run: a receiver that cannot be reached or refuses costs one warning line;
the batch is dropped and counted, later batches are dropped (not tried) for ``QUIET_S``, and
``close`` reports the count in one more line. A full queue drops spans too (counted).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import otlp, protobuf
from .plainpost import Poster
from .send import headers_from_env, traces_url
from .spans import Span

QUIET_S = 30.0
#: how long ``close`` waits for the last batches before it gives up on them (counted)
GRACE_S = 3.0
PROTOCOLS = ("http/protobuf", "http/json")


def _plain(url: str, timeout_s: float) -> Poster | None:
    """The sender for an ``http://`` URL reached directly (no ``HTTP_PROXY`` applies to it, as
    httpx reads the variables): ``plainpost.Poster``; None for any other (httpx then)."""
    u = urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        return None
    proxies = urllib.request.getproxies_environment()
    if ("http" in proxies or "all" in proxies) and not urllib.request.proxy_bypass_environment(
            u.hostname, proxies):
        return None
    try:
        port = u.port or 80
    except ValueError:
        return None
    return Poster(u.hostname, port, (u.path or "/") + (f"?{u.query}" if u.query else ""),
                  timeout_s)


class ConfigError(Exception):
    """A variable that asks for what cannot be done (gRPC, an unknown compression)."""


def _env(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or env.get(
        f"OTEL_EXPORTER_OTLP_{name}") or default


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None


class Shipper:
    """Takes finished spans (``add``), sends them in batches from its own thread."""

    def __init__(self, url: str, *, resource: Mapping[str, Any], headers: Mapping[str, str],
                 timeout_s: float = 10.0, protocol: str = "http/protobuf",
                 compression: str | None = None, delay_s: float = 5.0, max_queue: int = 2048,
                 batch: int = 512, warn: Callable[[str], None] | None = None,
                 transport: httpx.BaseTransport | None = None):
        if protocol not in PROTOCOLS:
            raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: mnemon sends "
                              f"{' or '.join(PROTOCOLS)} (gRPC is not supported)")
        if compression not in (None, "none", "gzip"):
            raise ConfigError(f"OTEL_EXPORTER_OTLP_COMPRESSION={compression!r}: gzip or none")
        self.url = url
        self.resource = dict(resource)
        self.protocol = protocol
        self.gzip = compression == "gzip"
        self.delay_s = delay_s
        self.max_queue = max_queue
        self.batch = batch
        self.headers = {**headers, "Content-Type": "application/x-protobuf"
                        if protocol == "http/protobuf" else "application/json"}
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        self.exported = 0
        self.dropped = 0
        self._warn = warn or (lambda line: sys.stderr.write(line + "\n"))
        self._warned = False
        self._resting_until = 0.0
        # encoded spans (protobuf ``Span`` messages) or, for http/json, the spans themselves:
        # encoded at once, the span's objects die young and the collector never meets them
        self._queue: deque[Any] = deque()
        self._wake = threading.Condition()
        self._closing = False
        # a plain-HTTP receiver reached directly (no proxy): one kept connection, a request
        # in one call (``plainpost``: the sender's thread gives the interpreter lock away as
        # seldom as it can); else httpx, as ``mnemon trace`` sends
        self._plain = _plain(url, timeout_s) if transport is None else None
        # no TLS context to build (certificates read: ~20 ms) for a plain-HTTP receiver
        self._client = None if self._plain is not None else httpx.Client(
            timeout=timeout_s, transport=transport, verify=url.startswith("https:"))
        self._thread = threading.Thread(target=self._run, name="mnemon-traces", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kw: Any) -> "Shipper":
        env = os.environ if environ is None else environ
        traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        url = traces or traces_url(env.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
        return cls(url, resource=otlp.resource_attributes(env), headers=headers_from_env(env),
                   timeout_s=_number(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                                     _number(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10.0)),
                   protocol=(_env(env, "PROTOCOL", "http/protobuf") or "").strip().lower(),
                   compression=(_env(env, "COMPRESSION") or "").strip().lower() or None,
                   delay_s=_number(env, "OTEL_BSP_SCHEDULE_DELAY", 5000.0) / 1000.0,
                   max_queue=int(_number(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048)),
                   batch=int(_number(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)), **kw)

    # ------------------------------------------------------------------ the run's side

    def add(self, spans: list[Span]) -> None:
        """Queue finished spans; never blocks, never raises."""
        q = self._queue
        room = self.max_queue - len(q)
        if room < len(spans):
            self.dropped += len(spans) - max(room, 0)
            spans = spans[:max(room, 0)]
        if self.protocol == "http/protobuf":
            encode = protobuf.span_bytes
            q.extend([encode(s) for s in spans])
        else:
            q.extend(spans)
        if len(q) >= self.batch:
            with self._wake:
                self._wake.notify()

    @property
    def takes_encoded(self) -> bool:
        """Whether ``add_encoded`` may be given spans already encoded (``protobuf.span_bytes``):
        the protobuf protocol's (the C builder writes them so)."""
        return self.protocol == "http/protobuf"

    def add_encoded(self, spans: list[bytes]) -> None:
        """Queue finished spans already encoded as protobuf ``Span`` messages; never blocks,
        never raises."""
        q = self._queue
        room = self.max_queue - len(q)
        if room < len(spans):
            self.dropped += len(spans) - max(room, 0)
            spans = spans[:max(room, 0)]
        q.extend(spans)
        if len(q) >= self.batch:
            with self._wake:
                self._wake.notify()

    def close(self) -> None:
        """Send what is queued (waiting at most ``GRACE_S`` once the sending has begun), stop
        the thread, and say how many spans were dropped, if any."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(GRACE_S + 0.5)
        if self._thread.is_alive():  # a receiver that does not answer: what is left is lost
            self.dropped += len(self._queue)
            self._queue.clear()
        elif self._client is not None:
            self._client.close()
        else:
            self._plain.close()  # type: ignore[union-attr]
        if self.dropped:
            self._warn(f"mnemon: traces: {self.dropped} of {self.dropped + self.exported} "
                       f"spans dropped (the receiver at {self.url} did not take them)")

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._closing and len(self._queue) < self.batch:
                    self._wake.wait(self.delay_s)
                closing = self._closing
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(self.batch, len(self._queue)))]
                self._send(batch)
                if not closing and len(self._queue) < self.batch:
                    break
            if closing and not self._queue:
                return

    def _send(self, spans: list[Any]) -> None:
        if time.monotonic() < self._resting_until:
            self.dropped += len(spans)
            return
        try:
            if self.protocol == "http/protobuf":
                body = protobuf.request_bytes((), self.resource, encoded=spans)
            else:
                body = json.dumps(otlp.request(spans, self.resource),
                                  separators=(",", ":")).encode("utf-8")
            if self.gzip:
                body = gzip.compress(body, compresslevel=5)
            if self._plain is not None:
                status = self._plain.post(body, self.headers)
            else:
                status = self._client.post(self.url, content=body,  # type: ignore[union-attr]
                                           headers=self.headers).status_code
            ok, why = 200 <= status < 300, f"HTTP {status}"
        except Exception as e:  # the receiver's fault, or ours: never the run's
            ok, why = False, " ".join(f"{type(e).__name__}: {e}".split())[:200]
        if ok:
            self.exported += len(spans)
            return
        self.dropped += len(spans)
        self._resting_until = time.monotonic() + QUIET_S
        if not self._warned:
            self._warned = True
            self._warn(f"mnemon: traces: could not send spans to {self.url} ({why}); "
                       "dropping spans while it is down, the run goes on")
