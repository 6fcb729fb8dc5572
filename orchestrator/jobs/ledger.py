"""The job's spend and progress across Dask workers, kept on the shared run root.

Each chunk attempt — one worker process running one chunk of a job's tasks — owns one **ledger
file**, ``<run root>/ledger/<run>/<chunk>.<attempt>`` (``run`` is the driver's tag for this run
of the job). It holds one fixed-width record, rewritten in place: what the attempt has spent
since it started (the four token counts and USD) and how many tasks it has running. Nobody else
writes it, so there is no lock and no append race (decision 0251):

* a worker whose job has a budget **publishes** after every turn (``SharedSpendSupervisor``'s
  meter, ``LedgerSpend``: the hook is the loop's own accounting) and **reads every other
  ledger before every turn** (``over_budget``), so the job's budget is one total over every
  worker and a turn starts only while it is not spent; without a budget it publishes at most
  every ``QUIET_S`` (the figures are only shown);
* the driver reads them for the live progress (cost so far, tasks running) and sums them for the
  job's usage when every chunk has ended.

An attempt that dies keeps its file: what it spent stays counted, and its retry — a new attempt,
a new file — counts only its own. What a run spent before this one is in the logs: the driver
reads it once (``run_cost``) and hands it to every chunk as the job's ``base``.

A record is ``v1 <input> <output> <cache read> <cache write> <usd> <running> <ended> <crc32>``
padded to ``RECORD`` bytes; a reader that catches a write half done sees a bad CRC and reads
again. An attempt that ended says so (``ended`` 1) and is never read again by that reader, so a
turn reads only the attempts still running.
"""

from __future__ import annotations

import os
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

from ...session.records import Usage
from ..spend import Spend
from ..supervisor import Supervisor

FOLDER = "ledger"
RECORD = 96
QUIET_S = 0.2  # without a budget, publish at most this often: the figures are only shown
RELIST_S = 1.0  # list a run's ledgers again at least this often, whatever the folder's mtime
FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


class Entry:
    """One attempt's record: its spend, its tasks running, whether it has ended."""

    __slots__ = ("usage", "usd", "running", "ended")

    def __init__(self, usage: Usage, usd: float, running: int, ended: bool = False):
        self.usage = usage
        self.usd = usd
        self.running = running
        self.ended = ended


def encode(usage: Usage, usd: float, running: int, ended: bool = False) -> bytes:
    body = " ".join(["v1", *(str(getattr(usage, f)) for f in FIELDS), repr(float(usd)),
                     str(running), "1" if ended else "0"])
    line = f"{body} {zlib.crc32(body.encode()):08x}"
    if len(line) >= RECORD:
        raise ValueError(f"a ledger record over {RECORD} bytes: {line!r}")
    return line.ljust(RECORD - 1).encode() + b"\n"


def decode(data: bytes) -> Entry | None:
    """The record, or None if it is torn, empty or not one."""
    try:
        body, _, crc = data.decode().strip().rpartition(" ")
        if not body.startswith("v1 ") or int(crc, 16) != zlib.crc32(body.encode()):
            return None
        _, a, b, c, d, usd, running, ended = body.split(" ")
        return Entry(Usage(input_tokens=int(a), output_tokens=int(b), cache_read_tokens=int(c),
                           cache_write_tokens=int(d)), float(usd), int(running), ended == "1")
    except ValueError:
        return None


def folder_of(root: Path, run: str) -> Path:
    return root / FOLDER / run


def clear(root: Path) -> None:
    """Remove every ledger of earlier runs: what they counted is in the logs now."""
    shutil.rmtree(root / FOLDER, ignore_errors=True)


class Reader:
    """Reads a run's ledgers; a record caught mid-write keeps the last good one of its file.

    Each file stays open and is read with one ``pread`` per call, and the folder is listed
    again only when its mtime says an attempt was added (or ``RELIST_S`` passed, for a file
    system with coarse times): a budgeted turn costs one ``stat`` and one ``pread`` per attempt
    still running. On NFS, a read sees another machine's write once the client revalidates the
    file (at once with ``actimeo=0`` / ``noac``).
    """

    def __init__(self, folder: Path, skip: str | None = None):
        self.folder = folder
        self.skip = skip
        self.last: dict[str, Entry] = {}
        self._raw: dict[str, bytes] = {}
        self._fds: dict[str, int] = {}
        self._listed: tuple[int, float] = (-1, 0.0)  # folder mtime, when listed

    def _list(self) -> None:
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return
        now = time.monotonic()
        if mtime == self._listed[0] and now - self._listed[1] < RELIST_S:
            return
        self._listed = (mtime, now)
        for e in os.scandir(self.folder):
            if e.name == self.skip or e.name in self._fds or e.name in self.last:
                continue
            try:
                self._fds[e.name] = os.open(e.path, os.O_RDONLY)
            except FileNotFoundError:
                pass

    def entries(self) -> dict[str, Entry]:
        self._list()
        for name, fd in list(self._fds.items()):
            for _ in range(3):
                raw = os.pread(fd, RECORD, 0)
                if raw == self._raw.get(name):
                    break
                entry = decode(raw)
                if entry is not None:
                    self.last[name], self._raw[name] = entry, raw
                    if entry.ended:  # its last record: never read again
                        os.close(self._fds.pop(name))
                    break
        return dict(self.last)

    def total(self) -> tuple[Usage, float]:
        entries = self.entries().values()
        return sum((e.usage for e in entries), Usage()), sum(e.usd for e in entries)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class Ledger:
    """This attempt's ledger file: written in place by one ``pwrite`` per record."""

    def __init__(self, folder: Path, name: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.path = folder / name
        self.others = Reader(folder, skip=name)
        self.running = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.published_at = 0.0

    def publish(self, usage: Usage, usd: float, *, ended: bool = False) -> None:
        os.pwrite(self._fd, encode(usage, usd, self.running, ended), 0)
        self.published_at = time.monotonic()

    def close(self) -> None:
        self.others.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LedgerSpend(Spend):
    """A spend meter whose run-wide figures are the job's over every worker.

    ``usage`` and ``cost_usd`` — what ``over_budget`` weighs and the loop's accounting adds
    to — read as ``base`` (earlier runs) + the other attempts' ledgers (as last read) + this
    process's own spend; an assignment changes only the own part, and publishes it. The loop
    adds to both after every turn (``Spend.add``), so every turn's spend is on the shared run
    root before this agent's next turn or any other agent's can start.
    """

    def __init__(self, settings: Any, *, ledger: Ledger, base: tuple[Usage, float]):
        self._ledger = None  # no publishing while Spend.__init__ zeroes the figures
        self._base_usage, self._base_usd = base
        self._seen_usage, self._seen_usd = Usage(), 0.0
        self._own_usage, self._own_usd = Usage(), 0.0
        super().__init__(settings)
        self._own_usage, self._own_usd = Usage(), 0.0
        self._ledger = ledger
        s = settings  # the job's budget is the run's: read the others before every turn
        self.budgeted = s.budget_tokens is not None or s.budget_usd is not None

    @property  # type: ignore[override]
    def usage(self) -> Usage:
        return self._base_usage + self._seen_usage + self._own_usage

    @usage.setter
    def usage(self, value: Usage) -> None:
        outside = self._base_usage + self._seen_usage
        self._own_usage = Usage(**{f: getattr(value, f) - getattr(outside, f) for f in FIELDS})

    @property  # type: ignore[override]
    def cost_usd(self) -> float:
        return self._base_usd + self._seen_usd + self._own_usd

    @cost_usd.setter
    def cost_usd(self, value: float) -> None:
        self._own_usd = value - self._base_usd - self._seen_usd
        # the loop sets usage, then cost_usd: one turn's spend, published once
        if self._ledger is not None and (self.budgeted or time.monotonic()
                                         - self._ledger.published_at >= QUIET_S):
            self.publish()

    def publish(self, *, ended: bool = False) -> None:
        """Write this attempt's spend and tasks running to its ledger now (``ended``: its
        last record)."""
        if self._ledger is not None:
            self._ledger.publish(self._own_usage, self._own_usd, ended=ended)

    def over_budget(self, node=None) -> str | None:
        """The base class's answer, the other workers' spend read first (with a job budget)."""
        if self.budgeted and self._ledger is not None:
            self._seen_usage, self._seen_usd = self._ledger.others.total()
        return super().over_budget(node)

    @property
    def own(self) -> tuple[Usage, float]:
        return self._own_usage, self._own_usd


class SharedSpendSupervisor(Supervisor):
    """A supervisor whose run's spend meter is the job's over every worker (``LedgerSpend``):
    what a Dask chunk runs its tasks under. (A supervisor, not a meter: ``LedgerSpend`` is the
    meter; the name said the other until decision 0344.)"""

    def __init__(self, root: Any, provider: Any, settings: Any, *args: Any, ledger: Ledger,
                 base: tuple[Usage, float], **kw: Any):
        super().__init__(root, provider, settings, *args,
                         spend=LedgerSpend(settings, ledger=ledger, base=base), **kw)

    def publish(self, *, ended: bool = False) -> None:
        """Write this attempt's spend and tasks running to its ledger now."""
        self.env.spend.publish(ended=ended)

    @property
    def own(self) -> tuple[Usage, float]:
        """This process's own spend, without the base and the other workers'."""
        return self.env.spend.own


SharedSpend = SharedSpendSupervisor  # kept one release (docs/changelog-names.md)
