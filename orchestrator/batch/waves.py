"""Waves: every agent turn ready to be requested, submitted as one batch; the rows handed back.

``BatchProvider`` is what the agents' loops call: its ``complete`` mints the request's custom id
(``ids.custom_id``: run, agent, turn, attempt), puts it into the next wave and waits for its row.
``Waves.drive`` submits the wave once the job has settled — every live agent is waiting on a
batch, or has a live child it waits for — then polls each batch with backoff, keeps its results
in the run root (``ledger``), and wakes each request's agent with its row (decision 0295). So
the loop, the tools, synods and children run unchanged: a wave is simply every agent's next
request at once.

Durability (decisions 0296, 0313). Per batch, in this order: its create's marker and requests
are written (``batches/<marker>.create``); the create is sent — and, its answer lost, never
sent again before the provider's listing is searched for the marker; the provider names it;
``batches/<id>.json`` is written; each agent's log gets a ``ProviderCall`` naming the batch and its custom id (no
usage: a submission); only then is it polled. When it ends its results are written to the run
root before any row is recorded; a row is recorded as a ``ProviderCall`` with the usage (or the
error), then the loop records the turn. A re-run reads the ledger and each agent's log: a custom
id the ledger holds is never submitted again (its batch is polled, or its kept row used), a row
whose usage is already in the log is not counted again. A create left without its batch (killed
while its answer was in flight) is looked for first: adopted when the provider lists it, dropped
when not, and the run ends on one line when the listing cannot be read.

Rows: ``succeeded`` is the turn's response; ``expired`` and ``canceled`` rows, and ``errored``
rows a live call would retry (overloaded, server errors, rate limits), go into the next wave as
a new attempt (the provider's ``RetryPolicy.max_attempts`` bounds expired and errored ones); any
other error fails the agent's turn, and the job's ``retries`` resume the task.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from datetime import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import structlog
import trio
import trio.testing

from ...lineage.runroot import now_iso
from ...providers.base import Request, Response
from ...providers.batches import BatchEnds, BatchRow, CreateUndecided, split
from ...providers.errors import ProviderError, http_error
from ...providers.prices import cost_usd
from ...session.log import iter_lines
from ...session.records import DECODE_ERRORS, ProviderCall, Usage
from .ids import create_marker, custom_id
from .journal import BatchJournal

if TYPE_CHECKING:
    from ..node import AgentNode
    from ..spend import Spend

log = structlog.get_logger("mnemon.batch")
_TOO_LONG = re.compile(r"prompt is too long|context[_ ]length|maximum context|context window",
                       re.IGNORECASE)

__all__ = ["BatchProvider", "Waves", "BatchStats", "BatchFailedRow"]


class BatchFailedRow(ProviderError):
    """A batched request that errored, or ran out of attempts: the agent's turn fails with it
    (``failed: provider: …``) and the job's ``retries`` decide whether the task goes on."""


class _Probe(msgspec.Struct):
    t: str
    custom_id: str | None = None
    usage: Usage | None = None
    error: str | None = None


_probe = msgspec.json.Decoder(_Probe)


class Entry:
    """One request of a wave: whose turn it is, its line, and where its row will land."""

    __slots__ = ("custom_id", "agent", "turn", "attempt", "line", "node", "reserved",
                 "reserved_usage", "row", "done", "batch", "queued_at")

    def __init__(self, cid: str, node: "AgentNode", turn: int, attempt: int, line: bytes):
        self.custom_id = cid
        self.agent = node.id
        self.node = node
        self.turn = turn
        self.attempt = attempt
        self.line = line
        self.reserved = 0.0  # the estimate counted on the run's spend while in flight
        self.reserved_usage: Usage | None = None
        self.row: BatchRow | None = None
        self.done = trio.Event()
        self.batch: str | None = None
        self.queued_at = time.monotonic()


class InFlight:
    __slots__ = ("id", "entries", "submitted_at", "wave")  # submitted_at: wall clock, seconds

    def __init__(self, batch: str, wave: int, submitted_at: float):
        self.id = batch
        self.entries: dict[str, Entry] = {}
        self.submitted_at = submitted_at
        self.wave = wave


class BatchStats(msgspec.Struct, kw_only=True):
    """What the progress line and ``--json`` show of the engine."""

    wave: int
    """Waves submitted (this run and the ones before it)."""
    waves_this_run: int
    in_flight: int
    """Batches submitted and not yet collected."""
    pending: int
    """Requests waiting in the next wave or in a batch in flight."""
    done: int
    """Requests whose row came back this run."""
    oldest_s: float | None
    """Age of the oldest batch in flight."""
    batches: int
    """Batches submitted this run."""


class Waves:
    """The engine's state: the next wave, the batches in flight, the ledger.

    Args:
        api: the provider's batch adapter (``providers.batches``).
        ledger: the run root's ``batches/``.
        agents: the run's live agents (the supervisor's table), read when deciding a wave.
        spend: the run's spend meter: a submitted request's estimated usage and cost are
            reserved on it until its row replaces the estimate with what it really used.
        run: the run's tag (``ids.run_tag``).
        poll_s, poll_max_s: the first wait between polls, doubled up to the second.
        max_attempts: submissions of one turn whose rows expired or errored retryably.
        hold_s: the longest a request waits for the job to settle before its wave goes anyway
            (an agent blocked on something that is neither a batch nor a child: a slow tool).
    """

    def __init__(self, api: Any, ledger: BatchJournal, agents: Callable[[], dict[str, "AgentNode"]],
                 spend: "Spend", *, run: str, price: Callable[["AgentNode"], tuple[str | None, str]],
                 poll_s: float = 5.0, poll_max_s: float = 60.0, max_attempts: int = 6,
                 hold_s: float = 30.0, settle_s: float = 0.02):
        self.api = api
        self.ledger = ledger
        self.agents = agents
        self.spend = spend
        self.run = run
        self.price = price
        self.poll_s = poll_s
        self.poll_max_s = poll_max_s
        self.max_attempts = max_attempts
        self.hold_s = hold_s
        self.settle_s = settle_s
        self.pending: list[Entry] = []
        self.in_flight: dict[str, InFlight] = {}
        self.waiting: dict[str, Entry] = {}  # agent id → its entry, pending or in flight
        self.known: dict[str, dict[str, str]] = {}  # agent → custom id → submitted|usage|error
        self.first_wave = ledger.waves()
        self.wave = self.first_wave
        self.batches_this_run = 0
        self.rows_done = 0
        self._decoded: dict[str, dict[str, BatchRow]] = {}  # batch → its rows, decoded once
        self.latency: dict[str, float] = {}  # custom id → seconds from its wave to its row
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ the agents' side

    async def complete(self, request: Request) -> Response:
        """The turn's response, through as many waves as its attempts need."""
        node = self.agents()[request.meta["agent"]]
        turn = node.ctx.next_id()
        known = self._known(node)
        attempt = 0
        failures = 0
        while True:
            attempt += 1
            cid = custom_id(self.run, node.id, turn, attempt)
            state = known.get(cid)
            if state == "error":
                continue  # a row an earlier attempt recorded: history, try the next
            row = self._kept_row(cid)
            if row is None:
                if cid in self.ledger.owner:  # submitted by an earlier run: its batch is polled
                    if state is None:  # (a crash between the ledger and this log)
                        self._record(node, cid)
                    row = await self._join(cid, node, turn, attempt)
                else:
                    row = await self._enqueue(cid, node, turn, attempt,
                                              self.api.line(cid, request))
            if row.kind == "succeeded":
                assert row.response is not None
                if state == "usage":  # its usage is in the log already (a crash right after)
                    self._uncount(node, row.response.usage)
                else:
                    self._record(node, cid, usage=row.response.usage)
                    _crash_point("recorded")
                return row.response
            self._record(node, cid, error=f"{row.kind}: {row.error}" if row.error and
                         row.error != row.kind else row.kind)
            if row.kind == "canceled":
                continue  # we cancelled it (Ctrl-C): not the model's failure
            if row.kind == "expired" or row.retryable:
                failures += 1
                if failures < self.max_attempts:
                    continue
                raise BatchFailedRow(f"{row.kind} {failures} times in batches: {row.error}")
            if _TOO_LONG.search(row.error or ""):  # the loop records ``failed: context``
                raise http_error(400, row.error, {}, context_too_long=True)
            raise BatchFailedRow(f"batch row errored: {row.error}")

    def _known(self, node: "AgentNode") -> dict[str, str]:
        """What the agent's log says of its batched requests (read once per agent)."""
        mine = self.known.get(node.id)
        if mine is None:
            mine = self.known[node.id] = {}
            for _off, line in iter_lines(node.log.path):
                raw = bytes(line)  # (a memoryview: ``in`` would compare single bytes)
                if b'"custom_id"' not in raw:
                    continue
                try:
                    rec = _probe.decode(raw)
                except DECODE_ERRORS:
                    continue
                if rec.t == "ProviderCall" and rec.custom_id:
                    mine[rec.custom_id] = ("usage" if rec.usage is not None else
                                           "error" if rec.error is not None else "submitted")
        return mine

    def _kept_row(self, cid: str) -> BatchRow | None:
        """The row of a collected batch (a missing row reads as expired), or None."""
        batch = self.ledger.owner.get(cid)
        if batch is None or batch not in self.ledger.results:
            return None
        rows = self._rows(batch)
        return rows.get(cid) or BatchRow(custom_id=cid, kind="expired", error="no row")

    def _rows(self, batch: str) -> dict[str, BatchRow]:
        """A collected batch's rows by custom id, decoded once (a batch that failed whole was
        kept as ``mnemon_error`` rows: each errored)."""
        got = self._decoded.get(batch)
        if got is None:
            raw = self.ledger.results[batch]
            if b'"mnemon_error"' in raw:
                got = {}
                for line in raw.splitlines():
                    if line.strip():
                        r = msgspec.json.decode(line)
                        got[r["custom_id"]] = BatchRow(custom_id=r["custom_id"], kind="errored",
                                                       error=r["mnemon_error"])
            else:
                got = {r.custom_id: r for r in self.api.rows(raw)}
            self._decoded[batch] = got
        return got

    async def _enqueue(self, cid: str, node: "AgentNode", turn: int, attempt: int,
                       line: bytes) -> BatchRow:
        entry = Entry(cid, node, turn, attempt, line)
        self.pending.append(entry)
        return await self._wait(entry)

    async def _join(self, cid: str, node: "AgentNode", turn: int, attempt: int) -> BatchRow:
        batch = self.ledger.owner[cid]
        flight = self.in_flight.get(batch)
        if flight is None:  # (the driver polls every open batch from its start)
            flight = self._track(batch)
        entry = Entry(cid, node, turn, attempt, b"")
        entry.batch = batch
        flight.entries[cid] = entry
        return await self._wait(entry)

    async def _wait(self, entry: Entry) -> BatchRow:
        self.waiting[entry.agent] = entry
        self._wake.set()
        try:
            await entry.done.wait()
            self.latency[entry.custom_id] = time.monotonic() - entry.queued_at
        finally:
            self.waiting.pop(entry.agent, None)
            if entry.row is None and entry.batch is None and entry in self.pending:
                self.pending.remove(entry)  # cancelled before its wave went
            self._release(entry)  # cancelled in flight (Ctrl-C): its estimate is no spend
        assert entry.row is not None
        return entry.row

    def _record(self, node: "AgentNode", cid: str, *, usage: Usage | None = None,
                error: str | None = None, batch: str | None = None) -> None:
        batch = batch or self.ledger.owner.get(cid)
        latency_s = self.latency.pop(cid, 0.0) if usage is not None or error is not None else 0.0
        priced, _ttl = self.price(node)
        attempt = int(cid.rsplit("-", 1)[1])
        node.log.append(ProviderCall(attempt=attempt, latency_s=round(latency_s, 3), usage=usage,
                                     error=error, model=priced, at=now_iso(), batch=batch,
                                     custom_id=cid))
        self.known.setdefault(node.id, {})[cid] = ("usage" if usage is not None else
                                                    "error" if error is not None else "submitted")
        if usage is not None or error is not None:
            self.rows_done += 1

    def _uncount(self, node: "AgentNode", usage: Usage) -> None:
        """A row whose usage its log already holds (recorded just before a crash, the turn
        not yet): the resumed agent counted it when its log was read back, and the loop is
        about to count it again — take it out once here."""
        priced, ttl = self.price(node)
        cost = cost_usd(usage, priced, ttl)
        node.usage = _minus(node.usage, usage)
        node.cost_usd -= cost
        self.spend.usage = _minus(self.spend.usage, usage)
        self.spend.cost_usd -= cost

    # ------------------------------------------------------------------ the driver

    async def drive(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Submit waves and poll batches until cancelled. Batches an earlier run left open are
        polled from the start. An error that ends the job (the server has no batch routes) is
        raised here and ends the run."""
        await self._reconcile()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            by_wave: dict[int, list[InFlight]] = {}
            for batch in self.ledger.open_batches():  # an earlier run's, each wave together
                by_wave.setdefault(self.ledger.batches[batch].get("wave", 0), []).append(
                    self._flight(batch))
            for flights in by_wave.values():
                nursery.start_soon(self._poll_wave, flights)
            task_status.started()
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                while self.pending:
                    await trio.testing.wait_all_tasks_blocked()
                    if not self.pending:
                        break
                    oldest = min(e.queued_at for e in self.pending)
                    if self._settled() or time.monotonic() - oldest >= self.hold_s:
                        await self._submit_wave()
                    else:
                        await trio.sleep(self.settle_s)

    async def _reconcile(self) -> None:
        """Creates an earlier run sent and never heard back from (killed while the answer was
        in flight): each one's batch, when the provider lists it, is recorded as submitted —
        its requests are then joined, not sent again; when it lists none, the create made
        nothing and its record goes. A listing that fails ends the run (``CreateUndecided``):
        nothing of it is sent until the next re-run can tell."""
        for marker, entry in list(self.ledger.creates.items()):
            requests = entry["requests"]
            try:
                batch = await self.api.find(marker, len(requests), float(entry["since"]), None,
                                            self.ledger.batches)
            except BatchEnds:
                raise
            except ProviderError as e:
                raise CreateUndecided(marker, e) from e
            if batch is None:
                await self.api.discard(marker, float(entry["since"]))
                self.ledger.abandoned(marker)
                log.info("create made no batch", marker=marker)
                continue
            log.warning("create adopted", marker=marker, batch=batch, requests=len(requests))
            self.ledger.submitted(batch, entry.get("provider", self.api.name),
                                  entry.get("wave", 0), requests, marker=marker)
            self.wave = max(self.wave, entry.get("wave", 0))
            self.first_wave = max(self.first_wave, entry.get("wave", 0))

    def _settled(self) -> bool:
        """Every live agent is waiting on a batch, or has a live child (it waits for it, or
        will be waiting once it asks again): no more requests will come before this wave's
        rows do."""
        waiting = self.waiting
        for node in list(self.agents().values()):
            if node.done.is_set() or node.id in waiting:
                continue
            if any(not c.done.is_set() for c in node.descendants().values()):
                continue
            return False
        return True

    def _flight(self, batch: str) -> InFlight:
        """A batch an earlier run submitted, in flight again (its age from the ledger)."""
        entry = self.ledger.batches[batch]
        flight = InFlight(batch, entry.get("wave", 0), _wall(entry.get("submitted_at")))
        self.in_flight[batch] = flight
        return flight

    def _track(self, batch: str) -> InFlight:
        flight = self._flight(batch)
        assert self._nursery is not None
        self._nursery.start_soon(self._poll_wave, [flight])
        return flight

    async def _submit_wave(self) -> None:
        entries, self.pending = self.pending, []
        self.wave += 1
        wave = self.wave
        chunks = _split(self.api, entries)
        log.info("wave", wave=wave, requests=len(entries), batches=len(chunks))
        flights: list[InFlight] = []
        for chunk in chunks:
            requests = [{"custom_id": e.custom_id, "agent": e.agent, "turn": e.turn,
                         "attempt": e.attempt} for e in chunk]
            marker = create_marker(self.run, wave, secrets.token_hex(6))
            since = time.time()
            self.ledger.creating(marker, self.api.name, wave, since, requests)  # before sending
            try:
                batch = await self.api.submit([e.line for e in chunk], marker=marker,
                                              since=since, exclude=self.ledger.batches)
            except CreateUndecided:
                raise  # it may have been made: its record stays for the re-run to look again
            except BatchEnds:
                self.ledger.abandoned(marker)
                raise  # no batch API there: the job ends (``job.route_missing``)
            except ProviderError as e:  # refused whole (a bad key, a body too large…)
                self.ledger.abandoned(marker)
                for entry in chunk:
                    entry.row = BatchRow(custom_id=entry.custom_id, kind="errored",
                                         error=f"the batch was refused: {e}")
                    entry.done.set()
                continue
            # durable before anything else: the run root's ledger, then each agent's log
            self.ledger.submitted(batch, self.api.name, wave, requests, marker=marker)
            _crash_point("ledgered")
            flight = InFlight(batch, wave, time.time())
            for entry in chunk:
                entry.batch = batch
                self._record(entry.node, entry.custom_id, batch=batch)
                self._reserve(entry)
                flight.entries[entry.custom_id] = entry
            self.in_flight[batch] = flight
            flights.append(flight)
            self.batches_this_run += 1
            _crash_point("submitted")
        if flights:  # polled together: the wave's rows come back at once, so its agents'
            # next turns make one wave again (not one per batch of a split wave)
            assert self._nursery is not None
            self._nursery.start_soon(self._poll_wave, flights)

    def _estimate(self, entry: Entry) -> Usage:
        """A request's usage before its row says: its bytes as uncached input at the node's
        measured tokens per byte (1/4 before any), plus its agent's mean output per turn so
        far."""
        node = entry.node
        tokens = int(len(entry.line) * (node.tokens_per_byte or 0.25))
        out = node.usage.output_tokens // max(1, node.turns_taken)
        return Usage(input_tokens=tokens, output_tokens=out)

    def _reserve(self, entry: Entry) -> None:
        """Count a submitted request's estimate on the run's spend (tokens and dollars) while
        it is in flight, so that the job's budget weighs it before its row comes back."""
        usage = self._estimate(entry)
        priced, ttl = self.price(entry.node)
        entry.reserved = cost_usd(usage, priced, ttl)
        entry.reserved_usage = usage
        self.spend.usage = self.spend.usage + usage
        self.spend.cost_usd += entry.reserved

    def _release(self, entry: Entry) -> None:
        """Take a request's estimate back off the run's spend (its row came, or it was
        cancelled): the loop counts what the row says."""
        if entry.reserved_usage is not None:
            self.spend.usage = _minus(self.spend.usage, entry.reserved_usage)
            self.spend.cost_usd -= entry.reserved
            entry.reserved, entry.reserved_usage = 0.0, None

    async def _poll_wave(self, flights: list[InFlight]) -> None:
        """Poll a wave's batches with backoff until every one has ended, keep each one's
        results in the run root as it ends, then hand every row of the wave to its agent."""
        delay = self.poll_s
        left = list(flights)
        while True:
            for flight in list(left):
                status = await self.api.status(flight.id)
                if status.ended:
                    await self._collect(flight, status)
                    left.remove(flight)
            if not left:
                break
            await trio.sleep(delay)
            delay = min(delay * 2, self.poll_max_s)
        _crash_point("collected")
        for flight in flights:
            self.in_flight.pop(flight.id, None)
            rows = self._rows(flight.id)
            for cid, entry in flight.entries.items():
                self._release(entry)
                entry.row = rows.get(cid) or BatchRow(custom_id=cid, kind="expired",
                                                      error="no row")
                entry.done.set()

    async def _collect(self, flight: InFlight, status: Any) -> None:
        """Fetch an ended batch's results and keep them (before any row is recorded). A batch
        that failed whole is kept as one ``mnemon_error`` row per request."""
        try:
            raw = await self.api.results(status)
        except BatchEnds:
            raise
        except ProviderError as e:  # failed whole: every request of it errored
            log.warning("batch failed", batch=flight.id, error=str(e))
            raw = b"".join(msgspec.json.encode({"custom_id": r["custom_id"], "mnemon_error":
                                                str(e)}) + b"\n"
                           for r in self.ledger.batches[flight.id]["requests"])
        self.ledger.collected(flight.id, raw)

    async def cancel_in_flight(self) -> list[str]:
        """Ask the provider to cancel every batch in flight, and record it (Ctrl-C). A re-run
        collects them: rows that finished are used, cancelled ones submitted again."""
        done = []
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            for batch in list(self.in_flight):
                try:
                    await self.api.cancel(batch)
                except ProviderError as e:
                    log.warning("cancel failed", batch=batch, error=str(e))
                    continue
                self.ledger.cancelled(batch)
                done.append(batch)
        return done

    # ------------------------------------------------------------------ figures

    def stats(self) -> BatchStats:
        now = time.time()
        ages = [now - f.submitted_at for f in self.in_flight.values()]
        pending = len(self.pending) + sum(len(f.entries) for f in self.in_flight.values())
        return BatchStats(wave=self.wave, waves_this_run=self.wave - self.first_wave,
                          in_flight=len(self.in_flight), pending=pending, done=self.rows_done,
                          oldest_s=max(ages) if ages else None, batches=self.batches_this_run)


def _split(api: Any, entries: list[Entry]) -> list[list[Entry]]:
    """The wave cut where the provider's limits require (a separator byte per line)."""
    chunks = split([e.line for e in entries], api.limits, overhead=1)
    return [[entries[i] for i in c] for c in chunks]


def _wall(iso: str | None) -> float:
    """A ledger time as seconds since the epoch (now, for none or a bad one)."""
    try:
        return datetime.fromisoformat((iso or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(input_tokens=a.input_tokens - b.input_tokens,
                 output_tokens=a.output_tokens - b.output_tokens,
                 cache_read_tokens=a.cache_read_tokens - b.cache_read_tokens,
                 cache_write_tokens=a.cache_write_tokens - b.cache_write_tokens)


CRASH_AT = "MNEMON_BATCH_CRASH_AT"


def _crash_point(where: str) -> None:
    """Fault injection for the resume tests: ``MNEMON_BATCH_CRASH_AT=ledgered`` (a batch in the
    run root's ledger, not yet in its agents' logs), ``submitted`` (a batch recorded, not yet
    polled), ``collected`` (its results kept, no row recorded) or
    ``recorded`` (a row's usage recorded, its turn not yet) kills the process there with
    SIGKILL, as a power cut would."""
    if os.environ.get(CRASH_AT) == where:
        os.kill(os.getpid(), signal.SIGKILL)


class BatchProvider:
    """The provider the agents' loops are given under the batch engine: ``complete`` goes
    through the waves. ``live`` is the provider's live adapter (closed with it)."""

    streams_text = False

    def __init__(self, waves: Waves, live: Any):
        self.waves = waves
        self.live = live
        self.name = getattr(live, "name", "batch")

    async def complete(self, request: Request, *, on_attempt: Any = None,
                       **_: Any) -> Response:
        return await self.waves.complete(request)

    async def aclose(self) -> None:
        await self.live.aclose()

