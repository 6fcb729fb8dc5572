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
from . import ids, semconv
from .build import TraceBuilder
from .spans import Span

__all__ = ["LiveTracer", "Sink"]


class Sink(Protocol):
    exported: int
    dropped: int

    def add(self, spans: list[Span]) -> None: ...

    def close(self) -> None: ...


class LiveTracer:
    """One builder per run root met. ``tap`` only notes each record (a list append, on the
    agent's own path); a thread of the tracer's feeds the noted records to the builders in
    batches — every ``delay_s``, or sooner once ``batch`` records wait — and hands the spans
    they finish to the sink. Done in batches, the builder's work runs warm in the processor's
    caches, at about half the cost of doing it record by record between the loop's own steps
    (docs/performance.md, "Traces"). ``close`` feeds what is left, ends what is still open
    (the agents of a stopped service) and closes the sink."""

    def __init__(self, sink: Sink, *, content: bool = False, latest_only: bool | None = None,
                 delay_s: float = 1.0, batch: int = 1024):
        self.sink = sink
        self.content = content
        self.latest_only = semconv.latest_only() if latest_only is None else latest_only
        self.delay_s = delay_s
        self.batch = batch
        self.runs: dict[Path, TraceBuilder] = {}
        # each agent log's builder and agent id by its path, found once (not per record)
        self._logs: dict[Any, tuple[TraceBuilder, str]] = {}
        # appended on the agent's path, taken from the other end by the thread: a deque's
        # append and popleft are atomic, so nothing noted is lost between the two
        self._noted: deque[tuple] = deque()
        self.spans = 0
        self.faults = 0
        self._lock = threading.Lock()  # the builders: the thread's, and ``close``'s
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="mnemon-trace-builder",
                                        daemon=True)
        self._thread.start()

    def _place(self, alog: Any) -> tuple[TraceBuilder, str]:
        path = Path(alog.path)
        root = path.parents[2]
        b = self.runs.get(root)
        if b is None:
            b = TraceBuilder(ids.run_key(read_run_json(root)), content=self.content,
                             latest_only=self.latest_only)
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
                if not self._closing and len(self._noted) < self.batch:
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
            if rest:
                self.spans += len(rest)
                self.sink.add(rest)
        finally:
            self.sink.close()
