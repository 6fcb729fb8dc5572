"""Which chunk of a Dask run runs each task: one claim per task, taken as the task starts
(decision 0472).

A run's chunks are cut in advance (``spread.chunks_of``), but what a chunk of tasks costs is
not known in advance: a worker that gets slower tasks, or a slower core, ends later than the
others while they wait idle, and a worker's second chunk starts only once its first has
drained. So each chunk walks its own tasks forward and, once they are all taken, the other
chunks' tasks backward from their ends, and runs what it could claim: the workers end together.

A claim is a slot of one file, ``<run>.claims``: 32 bytes at ``(2 + task index) × 32``
holding the claiming chunk's name, written under a record lock on the slot (``lockf``: the
lock, a ``pread``, a ``pwrite`` when free, the unlock — a few microseconds, and the same on a
disk: no file-system entry is made per claim, which costs 0.1–0.6 ms of kernel time on this
VM's ext4). The locks work across machines where ``flock`` does (NFSv4), and the NFS client
reads the slot afresh after taking a lock and writes it back before letting go. A chunk that
Dask runs again after its worker died finds its own claims and takes them again: the tasks it
had started resume from their logs, the ones it had finished are read from its results file.
The first two slots are marks: every task taken (``END``), the run stopped (``STOPPED``).

Why walking stops where it meets another chunk's claim: an owner claims its tasks in order
from the first, and thieves claim from the last down, each the highest one still free. So what
an owner has claimed is a prefix of its range and what thieves have claimed a suffix; an owner
meeting a thief's claim has reached the suffix (everything after it is taken), and a thief
meeting the owner's has reached the prefix. Only a thief meeting another thief's claim walks on.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

SLOT = 32  # bytes: a chunk's name, ``<run>-<n>``, NUL-padded
END, STOPPED = 0, 1  # the marks' slots; task i's is 2 + i


def _at(slot: int) -> int:
    return slot * SLOT


def create(path: Path, tasks: int) -> None:
    """The driver's: the claims of a run of ``tasks`` (the job's task count), all free."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.ftruncate(fd, _at(2 + tasks))
    finally:
        os.close(fd)


def stop(path: Path) -> None:
    """The driver's, on Ctrl-C or a failed start: no chunk takes another task."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.pwrite(fd, b"stopped", _at(STOPPED))
    finally:
        os.close(fd)


def all_taken(path: Path) -> bool:
    """Whether a walk went through every range of the run (``Claims.all_taken``)."""
    try:
        with open(path, "rb") as f:
            return f.read(SLOT).rstrip(b"\0") != b""
    except FileNotFoundError:
        return False


class Claims:
    """The claims of one run (the file ``path``), taken for one chunk (``chunk``)."""

    def __init__(self, path: Path, chunk: str):
        self.chunk = chunk
        self._name = chunk.encode()
        if len(self._name) > SLOT:
            raise ValueError(f"a chunk's name is at most {SLOT} bytes: {chunk!r}")
        try:  # made by the driver (``create``); gone once the run ended
            self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            self._fd = -1

    def _slot(self, slot: int, write: bool) -> bytes | None:
        """The slot's content (None: the claims are gone or stopped); written with this
        chunk's name, under the lock, if ``write`` and it is free."""
        if self._fd < 0:
            return None
        at = _at(slot)
        fcntl.lockf(self._fd, fcntl.LOCK_EX, SLOT, at)
        try:
            if os.pread(self._fd, SLOT, _at(STOPPED)).rstrip(b"\0"):
                return None
            held = os.pread(self._fd, SLOT, at).rstrip(b"\0")
            if not held and write:
                os.pwrite(self._fd, self._name, at)
                return self._name
            return held
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, SLOT, at)

    def take(self, index: int) -> str | None:
        """Claim task ``index`` for this chunk: None when it is this chunk's (now, or since an
        earlier attempt of it), "" when the run was stopped (or its claims are gone), else the
        name of the chunk that holds it."""
        held = self._slot(2 + index, write=True)
        if held is None:
            return ""
        return None if held == self._name else held.decode()

    def all_taken(self) -> None:
        """Mark that every task of the run is claimed (a walk went through every range): a
        chunk that starts after this, and never ran before, has nothing to take."""
        self._slot(END, write=True)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def walk(claims: Claims, own: Sequence[Any], others: Callable[[], list[tuple[str, list]]],
         *, index: Callable[[Any], int] = lambda t: t.index) -> Iterator[Any]:
    """The tasks this chunk runs, each claimed before it is yielded: ``own`` forward until one is
    held by another chunk, then each of ``others()`` — ``(owner chunk, its tasks)``, read only
    once the chunk's own are taken — backward until one is held by its owner."""
    for t in own:
        if claims.take(index(t)) is not None:
            break  # the thieves' suffix: the rest of the range is taken
        yield t
    for owner, tasks in others():
        for t in reversed(tasks):
            holder = claims.take(index(t))
            if holder is None:
                yield t
            elif holder == "":
                return  # the run was stopped
            elif holder == owner:
                break  # the owner's prefix: the rest of the range is taken
    claims.all_taken()


def steal_order(n: int, me: int) -> list[int]:
    """The other chunks of ``n`` in the order chunk ``me`` steals from them: the next one first
    (a worker's next chunk, not yet started, is the likeliest to have tasks left), around."""
    return [(me + k) % n for k in range(1, n)]
