"""Which chunk of a Dask run runs each task: one claim per task, taken as the task starts
(decision 0472).

A run's chunks are cut in advance (``spread.chunks_of``), but what a chunk of tasks costs is
not known in advance: a worker that gets slower tasks, or a slower core, ends later than the
others while they wait idle, and a worker's second chunk starts only once its first has
drained. So each chunk walks its own tasks forward and, once they are all taken, the other
chunks' tasks backward from their ends, and runs what it could claim: the workers end together.

A claim is a symbolic link ``<folder>/<task index>`` whose target is the claiming chunk's name,
made with one ``symlink`` (atomic, on NFS too: the name and its content appear at once, so a
claim is never seen half written) and read with one ``readlink``. A chunk that Dask runs again
after its worker died finds its own claims and takes them again: the tasks it had started
resume from their logs, the ones it had finished are read from its results file.

Why walking stops where it meets another chunk's claim: an owner claims its tasks in order
from the first, and thieves claim from the last down, each the highest one still free. So what
an owner has claimed is a prefix of its range and what thieves have claimed a suffix; an owner
meeting a thief's claim has reached the suffix (everything after it is taken), and a thief
meeting the owner's has reached the prefix. Only a thief meeting another thief's claim walks on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

END = "end"
"""The claim that marks every task claimed (a task's claim is named by its index: no clash)."""


class Claims:
    """The claims of one run (``folder``), taken for one chunk (``chunk``)."""

    def __init__(self, folder: Path, chunk: str):
        self.folder = folder
        self.chunk = chunk
        try:  # made by the driver (``spread.shares``); gone once the run ended or was stopped
            self._fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._fd = -1

    def take(self, index: int) -> str | None:
        """Claim task ``index`` for this chunk: None when it is this chunk's (now, or since an
        earlier attempt of it), else the name of the chunk that holds it."""
        name = str(index)
        if self._fd < 0:
            return ""
        try:
            os.symlink(self.chunk, name, dir_fd=self._fd)
            return None
        except FileExistsError:
            pass
        except FileNotFoundError:  # the claims are gone: the run was stopped (Ctrl-C) or
            return ""  # ended; no task is to be taken any more
        try:
            holder = os.readlink(name, dir_fd=self._fd)
        except FileNotFoundError:
            return ""
        return None if holder == self.chunk else holder


    def all_taken(self) -> None:
        """Mark that every task of the run is claimed (a walk went through every range): a
        chunk that starts after this, and never ran before, has nothing to take."""
        if self._fd >= 0:
            try:
                os.symlink(self.chunk, END, dir_fd=self._fd)
            except OSError:  # (marked already; or the claims are gone)
                pass

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
                return  # the claims are gone: the run was stopped
            elif holder == owner:
                break  # the owner's prefix: the rest of the range is taken
    claims.all_taken()


def all_taken(folder: Path) -> bool:
    """Whether a walk went through every range of the run (``Claims.all_taken``)."""
    return os.path.lexists(folder / END)


def steal_order(names: list[str], me: int) -> list[int]:
    """The other chunks in the order chunk ``me`` steals from them: the next one first (a
    worker's next chunk, not yet started, is the likeliest to have tasks left), around."""
    n = len(names)
    return [(me + k) % n for k in range(1, n)]
