"""The fork server a LocalCluster's Dask workers are forked from (decision 0252).

Kept apart from ``spread`` so that ``mnemon run --engine dask`` can start it before importing
anything else of the job machinery: it imports Dask and mnemon's chunk modules while the driver
imports and checks the rest.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
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
    global _ours
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["mnemon.orchestrator.jobs.warm"])  # PRELOAD, collector off
    from multiprocessing import forkserver

    with _lock:
        before = _server()
        forkserver.ensure_running()
        now = _server()
        if now is not None and (before is None or before[1] != now[1]):
            _ours = now[1]  # started here: ``serving`` may end it; one the host started, never


_users = 0  # LocalCluster runs of this process under way (``serving``): the server is theirs
_lock = threading.Lock()
_ours: int | None = None  # the pid of the fork server ``start_fork_server`` started, if running


@contextmanager
def serving() -> Iterator[None]:
    """The fork server for one LocalCluster run: started for it (or already running, as
    ``mnemon run`` starts it first), and ended after it once no other run of this process uses
    it (``stop_fork_server``). ``end_early`` may kill it sooner, once the run's cluster closed.

    Left to itself, the fork server ends only when the process that started it does: it then
    reads the end of its pipe and tears its interpreter down, Dask and mnemon's modules one by
    one, for 40–60 ms after the command ended, holding the command's standard output and error
    open all that while (``mnemon run … | jq`` waits for it): a process outliving the command
    (decision 0471)."""
    global _users
    start_fork_server()
    with _lock:
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                stop_fork_server()


def end_early() -> None:
    """Kill the fork server, not waiting for it, if the run calling this is the only one that
    uses it (``serving``) and its cluster is closed: the system frees it (5–10 ms for a process
    of its size) while the driver merges the results; ``serving`` reaps it after."""
    with _lock:
        if _users == 1:
            _kill()


def _server() -> tuple[object, int] | None:
    """``multiprocessing``'s fork server of this process and its pid, while it runs; None where
    either cannot be read (then the server is left to end with the process, as before)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if not isinstance(pid, int) or not callable(getattr(server, "_stop", None)):
        return None
    return server, pid


def _own_server() -> tuple[object, int] | None:
    """``_server()`` when ``start_fork_server`` started it; None for one the host started (a
    program that embeds mnemon keeps its own, and the processes it forked)."""
    found = _server()
    return found if found is not None and found[1] == _ours else None


def _kill() -> None:
    """SIGKILL to the fork server and to any process still forked from it (a worker a failed
    close left behind, orphaned once the server is gone). The server only forks: killed, it
    loses nothing."""
    found = _own_server()
    if found is None:
        return
    pid = found[1]
    try:
        import psutil  # Dask requires it

        children = psutil.Process(pid).children(recursive=True)
    except Exception:  # psutil missing, or the server gone already
        children = []
    for child in children:
        try:
            child.kill()
        except Exception:
            pass
    _killed.extend(children)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # ended already: reaped all the same by ``stop_fork_server``
        pass


_killed: list = []  # the processes forked from the server that ``_kill`` ended (psutil's)


def _until_ended(procs: list, timeout: float = 2.0) -> None:
    """Return once each of ``procs`` has ended — gone, or a zombie its new parent has yet to
    reap — or after ``timeout``. A SIGKILL is sent at once, but the kernel takes a few ms to
    tear a process of a worker's size down: until then it is still running, and the command
    would end before a process it started (decision 0471). They are the fork server's children,
    reparented when it died, so not ours to reap: their state is polled."""
    deadline = time.monotonic() + timeout
    left = list(procs)
    while left:
        still = []
        for p in left:
            try:
                if p.status() != "zombie":
                    still.append(p)
            except Exception:  # gone (NoSuchProcess), or no longer ours to read
                pass
        left = still
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.002)


def stop_fork_server() -> None:
    """End the fork server now (``_kill``) and reap it, when ``start_fork_server`` started it
    (``_own_server``); the next ``start_fork_server`` starts another. Uses
    ``multiprocessing.forkserver``'s own stop (``_stop``, CPython's, for its tests): close the
    server's pipe, wait for it, forget its address."""
    global _ours
    found = _own_server()
    if found is None:  # not started here: left to end with the process
        return
    server = found[0]
    _kill()
    _ours = None
    try:
        server._stop()  # type: ignore[attr-defined]
    except ChildProcessError:  # reaped elsewhere: forgotten, as ``ensure_running`` would
        server._forkserver_pid = None  # type: ignore[attr-defined]
    killed = _killed[:]
    del _killed[:]
    _until_ended(killed)  # the workers it had forked, ended before the command is


@contextmanager
def numpy_deferred(*also: str) -> Iterator[None]:
    """For the block, ``import numpy`` (and each of ``also``) fails as where it is not
    installed; after it, it works.

    ``distributed`` imports NumPy only if it can (one allocation helper for large frames, with
    a ``bytearray`` fallback; its array serializers register lazily), and a Dask run of mnemon
    sends no arrays: ~0.05–0.07 s of the fork server's preload and of the driver's imports,
    both on the way to the first chunk (decision 0470). ``OPTIONAL`` are two more of the kind
    (decision 0471). A tool that imports one still gets it, after the block; where something
    imported it before, it is left alone."""
    names = [n for n in ("numpy", *also) if n not in sys.modules]
    for name in names:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in names:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_distributed() -> None:
    """``import distributed`` as a run's driver needs it: without NumPy and jinja2 — it sends
    no arrays and renders no notebook's HTML (decisions 0470, 0471) — where that works; a Dask
    that needs NumPy imports it. The driver keeps ``rich`` (``mnemon -v`` renders with it)."""
    try:
        with numpy_deferred("jinja2"):
            import distributed  # noqa: F401
    except ImportError:
        import distributed  # noqa: F401


OPTIONAL = (
    # Imported by Dask and structlog only where installed, each with its fallback, for what a
    # Dask run of mnemon never does; ~0.015 s and ~0.03 s of the imports on the way to the first
    # chunk (decision 0471):
    "jinja2",  # ``dask.widgets``: the HTML reprs of a notebook (else: raised when asked for)
    "rich",  # ``structlog.dev``: tracebacks of its console renderer, used only by ``mnemon -v``
    # on a terminal — so the driver defers jinja2 alone; a worker logs JSON to its files
)
