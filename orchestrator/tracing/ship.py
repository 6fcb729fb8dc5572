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
import select
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
from ...errors import ConfigError as _ConfigError

QUIET_S = 30.0
#: how often the sender's thread steps a request without blocking (``plainpost``)
TICK_S = 0.2
#: how long ``close`` waits for the last batches before it gives up on them (counted)
GRACE_S = 3.0
PROTOCOLS = ("http/protobuf", "http/json")


def _why(e: Exception) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:200]


def _plain(url: str) -> Poster | None:
    """The sender for an ``http://`` URL reached directly (no ``HTTP_PROXY`` applies to it, as
    httpx reads the variables): ``plainpost.Poster``, which never blocks; None for any other
    (httpx, in the sender's thread)."""
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
    return Poster(u.hostname, port, (u.path or "/") + (f"?{u.query}" if u.query else ""))


class ConfigError(_ConfigError):
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
        self.timeout_s = timeout_s
        # A plain-HTTP receiver reached directly (no proxy): ``plainpost``, which never blocks,
        # stepped by whoever hands spans over and by the thread a few times a second (``_pump``)
        # — the sender then rarely wants the interpreter lock; else httpx in the thread (TLS, a
        # proxy, a test's transport), as ``mnemon trace`` sends.
        self._poster = _plain(url) if transport is None else None
        self._io = threading.Lock()  # the poster: held by one pumping thread at a time
        self._inflight = 0  # spans in the request under way
        self._began = 0.0  # when it began (monotonic)
        self._last_begin = time.monotonic()
        # no TLS context to build (certificates read: ~20 ms) for a plain-HTTP receiver
        self._client = None if self._poster is not None else httpx.Client(
            timeout=timeout_s, transport=transport, verify=url.startswith("https:"))
        self._thread = threading.Thread(
            target=self._run if self._poster is None else self._tick, name="mnemon-traces",
            daemon=True)
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
        self._queued()

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
        self._queued()

    def _queued(self) -> None:
        if self._poster is not None:
            self._pump()
        elif len(self._queue) >= self.batch:
            with self._wake:
                self._wake.notify()

    def close(self) -> None:
        """Send what is queued (waiting at most ``GRACE_S`` once the sending has begun), stop
        the thread, and say how many spans were dropped, if any."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(GRACE_S + 0.5)
        if self._poster is not None:
            self._drain(time.monotonic() + GRACE_S)
        elif self._thread.is_alive():  # a receiver that does not answer: what is left is lost
            self.dropped += len(self._queue)
            self._queue.clear()
        else:
            self._client.close()  # type: ignore[union-attr]
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

    def _body(self, spans: list[Any]) -> bytes:
        if self.protocol == "http/protobuf":
            body = protobuf.request_bytes((), self.resource, encoded=spans)
        else:
            body = json.dumps(otlp.request(spans, self.resource),
                              separators=(",", ":")).encode("utf-8")
        return gzip.compress(body, compresslevel=5) if self.gzip else body

    def _send(self, spans: list[Any]) -> None:
        if time.monotonic() < self._resting_until:
            self.dropped += len(spans)
            return
        try:
            status = self._client.post(self.url, content=self._body(spans),  # type: ignore
                                       headers=self.headers).status_code
            ok, why = 200 <= status < 300, f"HTTP {status}"
        except Exception as e:  # the receiver's fault, or ours: never the run's
            ok, why = False, _why(e)
        self._result(len(spans), ok, why)

    # ------------------------------------------------------------------ never blocking

    def _pump(self, partial: bool = False) -> None:
        """Step the request under way; begin the next once its answer is in and a batch waits
        (``partial``: fewer spans than a batch too). Never blocks: a caller that finds another
        pumping goes on, and so does one that finds the socket not ready."""
        p = self._poster
        if p is None or not self._io.acquire(blocking=False):
            return
        try:
            while True:
                if p.busy:
                    try:
                        status = p.step()
                    except Exception as e:  # the receiver's fault, or ours: never the run's
                        self._result(self._inflight, False, _why(e))
                        continue
                    if status is None:
                        if time.monotonic() - self._began <= self.timeout_s:
                            return
                        p.abandon()
                        self._result(self._inflight, False,
                                     f"no answer in {self.timeout_s:g} s")
                        continue
                    self._result(self._inflight, 200 <= status < 300, f"HTTP {status}")
                    continue
                q = self._queue
                if not q or len(q) < self.batch and not partial:
                    return
                if not p.ready and time.monotonic() >= self._resting_until:
                    return  # the address is the thread's to find
                spans = [q.popleft() for _ in range(min(self.batch, len(q)))]
                if time.monotonic() < self._resting_until:
                    self.dropped += len(spans)
                    continue
                self._last_begin = self._began = time.monotonic()
                try:
                    p.begin(self._body(spans), self.headers)
                except Exception as e:
                    self._result(len(spans), False, _why(e))
                    continue
                self._inflight = len(spans)
        finally:
            self._io.release()

    def _tick(self) -> None:
        """The thread of a ``Poster``: find the receiver's address, then a few times a second
        step what is under way and send a partial batch once ``delay_s`` has passed."""
        p = self._poster
        assert p is not None
        while True:
            if not p.ready and time.monotonic() >= self._resting_until:
                try:
                    p.resolve()
                except Exception as e:
                    self._result(0, False, _why(e))
            self._pump(partial=time.monotonic() - self._last_begin >= self.delay_s)
            with self._wake:
                if self._closing:
                    return
                self._wake.wait(min(self.delay_s, TICK_S))
                if self._closing:
                    return

    def _drain(self, deadline: float) -> None:
        """At close: send what is queued until ``deadline``; what is left then is dropped."""
        p = self._poster
        assert p is not None
        if not p.ready and time.monotonic() >= self._resting_until:
            try:
                p.resolve()
            except Exception as e:
                self._result(0, False, _why(e))
        while time.monotonic() < deadline:
            self._pump(partial=True)
            if not p.busy and (not self._queue or not p.ready):
                break
            if p.busy and p.sock is not None:
                select.select([p.sock], [p.sock] if p.sending else [], [],
                              max(0.0, min(0.05, deadline - time.monotonic())))
        if p.busy:
            p.abandon()
            self.dropped += self._inflight
        self.dropped += len(self._queue)
        self._queue.clear()
        p.close()

    def _result(self, n: int, ok: bool, why: str) -> None:
        if ok:
            self.exported += n
            return
        self.dropped += n
        self._resting_until = time.monotonic() + QUIET_S
        if not self._warned:
            self._warned = True
            self._warn(f"mnemon: traces: could not send spans to {self.url} ({why}); "
                       "dropping spans while it is down, the run goes on")
