"""The fork server a LocalCluster's Dask workers are forked from (decision 0252).

Kept apart from ``spread`` so that ``mnemon run --engine dask`` can start it before importing
anything else of the job machinery: it imports Dask and mnemon's chunk modules while the driver
imports and checks the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

PRELOAD = (
    # What a worker imports, loaded once in the fork server by ``warm`` (a name that cannot be
    # imported is skipped); the rest a worker imports itself, as before.
    "distributed", "distributed.nanny", "distributed.worker", "trio", "msgspec",
    "mnemon.orchestrator.jobs.spread", "mnemon.orchestrator.jobs.build",
    "mnemon.orchestrator.engines.dask",
    "mnemon.orchestrator.jobs.ledger", "mnemon.orchestrator.jobs.runner",
    "mnemon.orchestrator.loop", "mnemon.orchestrator.configure", "mnemon.orchestrator.tools",
    "mnemon.orchestrator.costs", "mnemon.providers.select", "mnemon.session.door",
)


def start_fork_server() -> None:
    """Start the fork server a LocalCluster's workers are forked from, with ``PRELOAD``: it
    imports them while the driver imports Dask and checks the job. Its workers are forked in
    milliseconds each instead of spawned (a new interpreter each importing ~1.1 s of CPU of
    Dask and mnemon). It serves every LocalCluster of this process, then ends with it."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["mnemon.orchestrator.jobs.warm"])  # PRELOAD, collector off
    from multiprocessing import forkserver

    forkserver.ensure_running()


@contextmanager
def numpy_deferred() -> Iterator[None]:
    """For the block, ``import numpy`` fails as where it is not installed; after it, it works.

    ``distributed`` imports NumPy only if it can (one allocation helper for large frames, with
    a ``bytearray`` fallback; its array serializers register lazily), and a Dask run of mnemon
    sends no arrays: ~0.05–0.07 s of the fork server's preload and of the driver's imports,
    both on the way to the first chunk (decision 0470). A tool that imports NumPy still gets
    it, after the block; where something imported it before, it is left alone."""
    if "numpy" in sys.modules:
        yield
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "numpy" in sys.modules and sys.modules["numpy"] is None:
            del sys.modules["numpy"]
