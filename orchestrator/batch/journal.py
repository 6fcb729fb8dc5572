"""The batch journal — the run root's record of batches: ``batches/<marker>.create`` while a
batch is being created, ``batches/<id>.json`` for each batch submitted, and
``batches/<id>.results.jsonl`` once its results are fetched.

The order of writes is the engine's durability (decisions 0296, 0313): a create's marker and
requests are written, and flushed, **before** the create is sent; a batch's file as soon as
the provider names it (then the create's file is removed) and **before** any poll; its results
as fetched **before** any row is recorded as a turn. A re-run reads this folder first: a create
left without its batch is looked for at the provider by its marker (adopted when found, dropped
when not) before anything is sent; a batch with no results is polled again; a request whose
custom id is here is never submitted again.

``<marker>.create``::

    {"format": 1, "marker": "mn-3f9a0c1e-w3-…", "provider": "anthropic", "wave": 3,
     "since": 1764633600.25, "requests": [{"custom_id", "agent", "turn", "attempt"}, …]}

(``since``: the wall-clock time before the create was first sent.) ``<id>.json``::

    {"format": 1, "batch": "msgbatch_…", "provider": "anthropic", "wave": 3,
     "submitted_at": "…", "requests": [{"custom_id", "agent", "turn", "attempt"}, …],
     "cancelled_at": null, "marker": "mn-3f9a0c1e-w3-…"}

(``marker`` is absent from a batch recorded before markers were kept.)

``<id>.results.jsonl`` is the provider's results as fetched (Anthropic's results file; OpenAI's
output file then its error file). A batch that failed whole (nothing of it ran) is kept as one
``{"custom_id", "mnemon_error"}`` line per request instead, so that its failure too is decided
once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ...lineage.runroot import now_iso
from ...errors import Failure

__all__ = ["BatchJournal", "BatchJournalError", "DIR", "Ledger", "LedgerError"]

DIR = "batches"
CREATE = ".create"
_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


class BatchJournalError(Failure):
    """A batch file that cannot be read, or a batch id that is not a safe file name."""


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class BatchJournal:
    """The batches of one run root: their files, and an index of custom id → batch id."""

    def __init__(self, root: Path):
        self.dir = Path(root) / DIR
        self.batches: dict[str, dict[str, Any]] = {}
        self.results: dict[str, bytes] = {}
        self.owner: dict[str, str] = {}  # custom id → batch id
        self.creates: dict[str, dict[str, Any]] = {}  # marker → a create not yet answered
        if self.dir.is_dir():
            for p in sorted(self.dir.glob("*.json")):
                try:
                    entry = json.loads(p.read_bytes())
                except (OSError, ValueError) as e:
                    raise BatchJournalError(f"{p}: not a batch file ({e})") from None
                self._index(entry)
                res = self.dir / f"{entry['batch']}.results.jsonl"
                if res.is_file():
                    self.results[entry["batch"]] = res.read_bytes()
            markers = {e.get("marker") for e in self.batches.values()}
            for p in sorted(self.dir.glob(f"*{CREATE}")):
                try:
                    entry = json.loads(p.read_bytes())
                except (OSError, ValueError) as e:
                    raise BatchJournalError(f"{p}: not a batch create file ({e})") from None
                if not isinstance(entry, dict) or not {"marker", "requests"} <= entry.keys():
                    raise BatchJournalError(f"{p}: not a batch create file (no marker or requests)")
                if entry["marker"] in markers:  # answered: its batch's file was written
                    p.unlink(missing_ok=True)
                else:
                    self.creates[entry["marker"]] = entry

    def _index(self, entry: dict[str, Any]) -> None:
        self.batches[entry["batch"]] = entry
        for r in entry["requests"]:
            self.owner[r["custom_id"]] = entry["batch"]

    def _path(self, batch: str, suffix: str) -> Path:
        if not _SAFE.match(batch) or batch.startswith("."):
            raise BatchJournalError(f"batch id {batch!r} is not a safe file name")
        return self.dir / f"{batch}{suffix}"

    def creating(self, marker: str, provider: str, wave: int, since: float,
                 requests: list[dict[str, Any]]) -> None:
        """Record a create about to be sent (before it is): its marker and requests, so that
        a batch it made whose answer never came is found again, even by a re-run."""
        self.dir.mkdir(exist_ok=True)
        entry = {"format": 1, "marker": marker, "provider": provider, "wave": wave,
                 "since": since, "requests": requests}
        _write(self._path(marker, CREATE), json.dumps(entry).encode())
        self.creates[marker] = entry

    def abandoned(self, marker: str) -> None:
        """A create that made no batch: its record goes."""
        self._path(marker, CREATE).unlink(missing_ok=True)
        self.creates.pop(marker, None)

    def submitted(self, batch: str, provider: str, wave: int,
                  requests: list[dict[str, Any]], marker: str | None = None) -> None:
        """Record a batch the provider has just accepted (before it is polled); its create's
        record, if any, goes once this is on disk."""
        self.dir.mkdir(exist_ok=True)
        entry = {"format": 1, "batch": batch, "provider": provider, "wave": wave,
                 "submitted_at": now_iso(), "requests": requests, "cancelled_at": None}
        if marker is not None:
            entry["marker"] = marker
        _write(self._path(batch, ".json"), json.dumps(entry).encode())
        self._index(entry)
        if marker is not None:
            self.abandoned(marker)

    def collected(self, batch: str, raw: bytes) -> None:
        """Keep an ended batch's results, as fetched (before any row is recorded)."""
        _write(self._path(batch, ".results.jsonl"), raw)
        self.results[batch] = raw

    def cancelled(self, batch: str) -> None:
        entry = dict(self.batches[batch], cancelled_at=now_iso())
        _write(self._path(batch, ".json"), json.dumps(entry).encode())
        self.batches[batch] = entry

    def open_batches(self) -> list[str]:
        """Batches submitted whose results are not kept yet, oldest wave first."""
        return sorted((b for b in self.batches if b not in self.results),
                      key=lambda b: self.batches[b].get("wave", 0))

    def waves(self) -> int:
        return max((e.get("wave", 0) for e in self.batches.values()), default=0)


# kept one release (docs/changelog-names.md): this module was ``batch/ledger.py``, a name the
# Dask workers' spend files (``jobs/ledger.py``) also have
Ledger = BatchJournal
LedgerError = BatchJournalError
