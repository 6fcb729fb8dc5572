"""The records' tap (``AgentLog.tap``) of a traced process: every record an agent appends, as
it is appended, through the builder; the spans it finishes to a sink — ``ship.Shipper``
(OTLP/HTTP from the standard variables) or ``live.SdkSink`` (an OpenTelemetry SDK span
processor, the ``otel`` extra).

The spans are the builder's, the same as ``mnemon trace`` makes later from the logs, ids and
times included. A record that cannot be traced costs one warning line, never the run.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from ...lineage.runroot import read_run_json
from ...session.records import SessionStarted
from . import ids, native_build, semconv
from .build import TraceBuilder
from .spans import Span

__all__ = ["LiveTracer", "Sink"]


class Sink(Protocol):
    """Where finished spans go. One that also has ``takes_encoded`` (true) and
    ``add_encoded(list[bytes])`` takes spans already encoded as protobuf ``Span`` messages,
    which the C builder writes."""

    exported: int
    dropped: int

    def add(self, spans: list[Span]) -> None: ...

    def close(self) -> None: ...


class LiveTracer:
    """One builder per run root met, two ways.

    - **The C builder** (``native_build``: built, no ``content``, a sink that takes encoded
      spans — the Shipper over OTLP/HTTP protobuf, what the commands use): ``tap`` feeds each
      record to it at once, on the agent's own path, while the record is still in the cache; it
      writes the spans it finishes as protobuf bytes, handed to the sink ``handover`` at a time
      and, by a thread of the tracer's, every ``delay_s``. A few microseconds per turn
      (docs/performance.md, "Traces").
    - **The Python builder** (``build.TraceBuilder``: message content, an SDK sink, or no C
      builder here): ``tap`` only notes each record (a list append); the tracer's thread feeds
      the noted records to the builders in batches — every ``delay_s``, or sooner once
      ``batch`` records wait — and hands the spans they finish to the sink.

    ``close`` feeds what is left, ends what is still open (the agents of a stopped service) and
    closes the sink. ``native``: None for the C builder where it can serve, False for the
    Python one."""

    def __init__(self, sink: Sink, *, content: bool = False, latest_only: bool | None = None,
                 delay_s: float = 1.0, batch: int = 1024, handover: int = 256,
                 native: bool | None = None):
        self.sink = sink
        self.content = content
        self.latest_only = semconv.latest_only() if latest_only is None else latest_only
        self.delay_s = delay_s
        self.batch = batch
        self.handover = handover
        self.native = (native is not False and native_build.AVAILABLE and not content
                       and bool(getattr(sink, "takes_encoded", False)))
        self.runs: dict[Path, Any] = {}
        # each agent log's builder and agent id by its path, found once (not per record)
        self._logs: dict[Any, tuple[Any, str]] = {}
        # appended on the agent's path, taken from the other end by the thread: a deque's
        # append and popleft are atomic, so nothing noted is lost between the two
        self._noted: deque[tuple] = deque()
        self.spans = 0
        self.faults = 0
        self._lock = threading.Lock()  # the builders: the agents' path, the thread's, ``close``'s
        self._wake = threading.Condition()
        self._closing = False
        if self.native:
            self.tap = self._tap_native  # type: ignore[method-assign]
            self.flush = self._flush_native  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._run, name="mnemon-trace-builder",
                                        daemon=True)
        self._thread.start()

    def _place(self, alog: Any) -> tuple[TraceBuilder, str]:
        path = Path(alog.path)
        root = path.parents[2]
        b = self.runs.get(root)
        if b is None:
            run = ids.run_key(read_run_json(root))
            b = (native_build.builder(run, latest_only=self.latest_only) if self.native else
                 TraceBuilder(run, content=self.content, latest_only=self.latest_only))
            self.runs[root] = b
        placed = self._logs[alog.path] = (b, path.parent.name)
        return placed

    def tap(self, alog: Any, record: Any, locus: Any) -> None:
        """``AgentLog.tap(agent_log, record, locus)``: only noted — where the log belongs and
        what it holds is the thread's to find — and never raises into the append."""
        noted = self._noted
        noted.append((alog, record, locus))
        if len(noted) >= self.batch:
            with self._wake:
                self._wake.notify()

    def _tap_native(self, alog: Any, record: Any, locus: Any) -> None:
        """``tap`` with the C builder: the record fed at once; its spans handed to the sink
        ``handover`` at a time. Never raises into the append."""
        try:
            with self._lock:
                placed = self._logs.get(alog.path)
                if placed is None:
                    placed = self._place(alog)
                    placed[0].meet(placed[1], record if isinstance(record, SessionStarted)
                                   else alog.ctx.started)
                if placed[0].feed(placed[1], record, locus[1]) >= self.handover:
                    self._hand(placed[0].take())
        except Exception as e:
            self._fault(e)

    def _hand(self, encoded: list[bytes]) -> None:
        """Encoded spans to the sink (the lock held)."""
        self.spans += len(encoded)
        try:
            self.sink.add_encoded(encoded)  # type: ignore[attr-defined]
        except Exception as e:  # a sink's fault is not the run's either
            self._fault(e)

    def _flush_native(self) -> None:
        with self._lock:
            for b in self.runs.values():
                encoded = b.take()
                if encoded:
                    self._hand(encoded)

    def _feed(self, alog: Any, record: Any, locus: Any, done: list[Span]) -> None:
        placed = self._logs.get(alog.path)
        if placed is None:
            placed = self._place(alog)
            # an agent met first through a resume: its opening, from its table
            placed[0].meet(placed[1], record if isinstance(record, SessionStarted)
                           else alog.ctx.started)
        placed[0].feed(placed[1], record, locus[1], done)

    def _fault(self, e: Exception) -> None:
        self.faults += 1
        if self.faults == 1:
            sys.stderr.write(f"mnemon: traces: a record could not be traced "
                             f"({type(e).__name__}: {e}); the run goes on\n")

    def flush(self) -> None:
        """Feed every record noted so far; hand the spans they finish to the sink."""
        with self._lock:
            noted = self._noted
            done: list[Span] = []
            feed = self._feed
            for _ in range(len(noted)):
                try:
                    feed(*noted.popleft(), done)
                except Exception as e:
                    self._fault(e)
            if done:
                self.spans += len(done)
                try:
                    self.sink.add(done)
                except Exception as e:  # a sink's fault is not the run's either
                    self._fault(e)

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._closing and (self.native or len(self._noted) < self.batch):
                    self._wake.wait(self.delay_s)
                if self._closing:
                    return
            self.flush()

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        try:
            self.flush()
            with self._lock:
                rest = [s for b in self.runs.values() for s in b.finish()]
                if rest and self.native:
                    self._hand(rest)
            if rest and not self.native:
                self.spans += len(rest)
                self.sink.add(rest)
        finally:
            self.sink.close()
