"""The cyclic garbage collector, set for a process that holds many agents (decision 0261).

CPython collects its youngest generation every 700 container allocations, and the oldest when
the long-lived objects grew by a quarter: a run that holds a thousand agents' tables, records
and Trio tasks, and allocates a few dicts per block it renders, spent 15-20 % of its CPU in the
collector (a thousand-agent swarm: 0.8 s of 4.8 s, 571 young and 5 full collections). Reference
counting frees almost everything mnemon lets go; what needs the collector (a finished agent's
cycles through its cancel scope and callbacks, an exception's traceback) can wait longer.

``for_process`` is what the ``mnemon`` command does at start; ``tuned`` does the same for the
length of a block and then puts the host's settings back (a Dask worker runs a chunk in it). A
program that embeds mnemon keeps its own settings unless it calls one of them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (50_000, 20, 20)
"""Young generation every 50 000 container allocations (CPython: 700), the middle every 20 of
those, the oldest every 20 of the middle's (and, as always, only once it grew by a quarter)."""


def for_process() -> None:
    """For the whole process: what is alive now (modules, their constants) is moved out of the
    collector's sight (``gc.freeze``), and the thresholds are raised."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


@contextmanager
def tuned() -> Iterator[None]:
    """The raised thresholds for the block; the previous ones after it."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextmanager
def warming() -> Iterator[None]:
    """The collector off while a process imports what it keeps for its whole life (Dask and
    NumPy: ~600 000 objects); after the block, what is alive is frozen and the collector is back.

    Each young collection during such imports promotes thousands of module objects, and each
    full one walks them all: in ``mnemon run --engine dask`` the driver spent 31 ms and 58 ms in
    two full collections and ~30 ms in middle ones before its first chunk was sent (decision
    0264). Frozen, they are in no later collection either — in a Dask worker forked from the
    fork server, not in a chunk's."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()
