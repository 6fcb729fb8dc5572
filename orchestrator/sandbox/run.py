"""Running one command, bounded: ``run_command`` and what it answers, ``ShellOutcome``.

A command runs as ``bash -c COMMAND`` in the workspace — under bubblewrap (``kind = "bwrap"``) or
directly on the machine (``"none"``) — started by a tiny ``/bin/sh`` launcher that puts itself
into the command's cgroup and sets the per-process limits before it ``exec``\\ s the rest, so no
process of the command ever runs outside them::

    sh -c LAUNCH sh <cgroup.procs files> -- bwrap … -- bash -c COMMAND

Its output (stdout and stderr as one pipe, so interleaved as written) is read as it comes and
kept as head and tail (``capture.Capture``). It ends at its wall time, at a cancel of the calling
task, or when its main process exits — and then every process it made ends too (SIGKILL to its
cgroup, its process group, and bubblewrap, whose PID namespace dies with it): a command leaves
nothing running behind it (decision 0364).

Started on the Trio thread, not in a worker thread as ``trio.lowlevel.open_process`` does
(decision 0363): bubblewrap's ``--die-with-parent`` is a parent-death signal, which Linux sends
when the *thread* that started the process ends — and Trio retires an idle worker thread after
ten seconds, which would kill every command that outlives it. The spawn (a ``vfork`` and an
``exec``) blocks the loop for about a millisecond (``bench/sandbox.py``).

Cancellation: a cancel of the calling task ends the command's whole tree before it propagates
(the cleanup is shielded and bounded). Resource handling: the pipe, the pidfd and the cgroup are
released on every path.
"""

from __future__ import annotations

import math
import os
import signal as signals
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import trio
from msgspec import Struct

from .bwrap import bwrap_argv, require_bwrap
from .capture import Capture
from .cgroup import Cgroup, open_cgroup
from .environ import LAUNCHER_ENV, command_env
from .spec import SandboxError, SandboxSettings

__all__ = ["OUTPUT_CEILING", "ShellOutcome", "run_command"]

#: past this much output a command is ended (``limits`` has ``output``): reading it costs the
#: harness's own thread, and no model reads a gigabyte
OUTPUT_CEILING = 1 << 30
#: after the main process exits, how long the output still in the pipe may take to arrive
GRACE_S = 1.0
#: how long the cleanup may wait for the killed tree to be reaped and its cgroup removed
REAP_S = 5.0
READ_CHUNK = 1 << 16
#: the launcher: joins each cgroup named before ``--`` (its children are born in them), sets the
#: per-process limits (``{limits}``, numbers only), then becomes the command
LAUNCH = ('for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; '
          '{limits}exec "$@"')


class ShellOutcome(Struct, frozen=True, kw_only=True):
    """What one command did."""

    kind: str
    """The sandbox it ran under: ``bwrap`` or ``none``."""
    exit_code: int | None
    """Its exit status; None when it was ended by a signal (``signal``)."""
    signal: int | None
    output: str
    """stdout and stderr interleaved, decoded (UTF-8, bad bytes replaced), control characters
    escaped; head and tail with the omitted middle said when ``truncated``."""
    total_bytes: int
    truncated: bool
    seconds: float
    timed_out: bool
    timeout_s: float
    """The wall time it was given."""
    limits: tuple[str, ...] = ()
    """The limits it ran into: ``timeout``, ``cpu``, ``memory``, ``processes``, ``output``."""
    unbounded: tuple[str, ...] = ()
    """Limits this machine could not enforce for it (no cgroup): ``processes``; ``memory``
    (then held per process only, by RLIMIT_AS)."""


async def run_command(command: str, cwd: Path, settings: SandboxSettings, *,
                      run_root: Path | None, timeout_s: float | None = None,
                      environ: Mapping[str, str] | None = None) -> ShellOutcome:
    """Run ``bash -c command`` in ``cwd`` (the workspace) as ``settings`` say, and answer what it
    did once every process of it has ended.

    ``timeout_s`` (None: ``settings.timeout_s``) is cut to ``settings.max_timeout_s``;
    ``run_root`` is kept out of the sandbox's sight; ``environ`` (default: mnemon's) is where
    ``settings.env``'s names are read from. Raises ``SandboxUnavailable`` (a ``SandboxError``)
    when ``kind = "bwrap"`` and bubblewrap cannot start here — the command is never run
    unconfined instead — and ``SandboxError`` when the command cannot be started at all."""
    parent = os.environ if environ is None else environ
    timeout = float(min(settings.timeout_s if timeout_s is None else timeout_s,
                        settings.max_timeout_s))
    cwd = Path(os.path.abspath(cwd))  # bubblewrap starts in /: a relative path would bind there
    run_root = Path(os.path.abspath(run_root)) if run_root is not None else None
    if not cwd.is_dir():
        raise SandboxError(f"the workspace {str(cwd)!r} is not a directory")
    env = command_env(settings, parent)
    if settings.kind == "bwrap":
        bwrap = await require_bwrap(parent)
        inner = bwrap_argv(bwrap, settings, cwd, run_root=run_root, env=env)
        spawn_env, spawn_cwd = dict(LAUNCHER_ENV), "/"
    else:
        inner, spawn_env, spawn_cwd = [], env, str(cwd)
    inner += ["bash", "-c", command]

    cg = open_cgroup(settings.memory_mb << 20, settings.processes, environ=dict(parent))
    bounded = cg.bounded if cg is not None else ()
    cpu = math.ceil(settings.cpu_s if settings.cpu_s is not None else timeout)
    limits = f"ulimit -c 0; ulimit -S -t {cpu}; ulimit -H -t {cpu + 1}; "
    if "memory" not in bounded:
        limits += f"ulimit -v {settings.memory_mb << 10}; "
    argv = ["/bin/sh", "-c", LAUNCH.format(limits=limits), "sh",
            *(str(f) for f in (cg.procs_files if cg is not None else [])), "--", *inner]

    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                                env=spawn_env, cwd=spawn_cwd, start_new_session=True,
                                close_fds=True)
    except OSError as e:
        os.close(read_fd)
        if cg is not None:
            cg.remove()
        raise SandboxError(f"the command could not be started: {e.strerror or e}") from None
    finally:
        os.close(write_fd)
    return await _supervise(proc, read_fd, cg, settings, timeout)


async def _supervise(proc: subprocess.Popen[bytes], read_fd: int, cg: Cgroup | None,
                     settings: SandboxSettings, timeout: float) -> ShellOutcome:
    """Read, wait, end the tree, reap, clean up: the part of ``run_command`` that owns a
    running command."""
    started = time.monotonic()
    capture = Capture(settings.output_bytes)
    stream = trio.lowlevel.FdStream(read_fd)
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux ≥ 5.3: polled instead
        pidfd = None
    eof = trio.Event()
    over_ceiling = False

    def end_tree() -> None:
        """SIGKILL every process of the command: its cgroup's, its process group (the
        launcher's session: bubblewrap, or bash under kind none) — bubblewrap's death takes its
        PID namespace with it. Idempotent."""
        if cg is not None:
            cg.kill()
        try:
            os.killpg(proc.pid, signals.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    async def drain() -> None:
        nonlocal over_ceiling
        while True:
            data = await stream.receive_some(READ_CHUNK)
            if not data:
                eof.set()
                return
            capture.feed(data)
            if capture.total > OUTPUT_CEILING:
                over_ceiling = True
                end_tree()
                eof.set()
                return

    timed_out = False
    try:
        with trio.move_on_after(timeout) as timer:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                await _wait(proc, pidfd)
                end_tree()  # the main process has ended: whatever it left running ends too
                with trio.move_on_after(GRACE_S):
                    await eof.wait()
                nursery.cancel_scope.cancel()
        timed_out = timer.cancelled_caught
    finally:
        end_tree()
        with trio.CancelScope(shield=True):
            with trio.move_on_after(REAP_S):
                await _wait(proc, pidfd)
            hits = await _end(cg)
            if not eof.is_set():  # what the killed tree wrote before it died
                with trio.move_on_after(GRACE_S):
                    while data := await stream.receive_some(READ_CHUNK):
                        capture.feed(data)
            await stream.aclose()
            if pidfd is not None:
                trio.lowlevel.notify_closing(pidfd)
                os.close(pidfd)
    seconds = time.monotonic() - started

    rc = proc.returncode
    exit_code = rc if rc is not None and rc >= 0 else None
    sig = -rc if rc is not None and rc < 0 else None
    limits: list[str] = []
    if timed_out:
        limits.append("timeout")
    if sig == signals.SIGXCPU or exit_code == 128 + signals.SIGXCPU:
        limits.append("cpu")
    limits += hits
    if capture.truncated or over_ceiling:
        limits.append("output")
    bounded = cg.bounded if cg is not None else ()
    return ShellOutcome(
        kind=settings.kind, exit_code=exit_code, signal=sig, output=capture.text(),
        total_bytes=capture.total, truncated=capture.truncated, seconds=seconds,
        timed_out=timed_out, timeout_s=timeout, limits=tuple(limits),
        unbounded=tuple(x for x in ("processes", "memory") if x not in bounded))


async def _wait(proc: subprocess.Popen[bytes], pidfd: int | None) -> None:
    """Until the launcher (bubblewrap, or bash) has exited, then reap it."""
    if pidfd is not None:
        await trio.lowlevel.wait_readable(pidfd)
        proc.wait()
        return
    while proc.poll() is None:
        await trio.sleep(0.01)


async def _end(cg: Cgroup | None) -> tuple[str, ...]:
    """Kill what is left in the command's cgroup until it is empty, then read which bounds the
    command ran into and remove the cgroup; bounded, and shielded by the caller. A killed
    process leaves its cgroup a moment after the signal, so the passes are a few milliseconds
    apart rather than a tight loop."""
    if cg is None:
        return ()
    hits = cg.hits()
    with trio.move_on_after(REAP_S):
        while True:
            cg.kill()
            if not cg.pids():
                hits = cg.hits()
                if cg.remove():
                    break
            await trio.sleep(0.002)
    return hits
