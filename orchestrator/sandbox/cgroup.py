"""A command's cgroup: what bounds its processes and its memory together, and what ends them all.

Why a cgroup (decision 0362): mnemon runs as root on its own machines and in CI, and root is
never held by ``RLIMIT_NPROC`` — a fork bomb under ``ulimit -u`` goes on forking. The ``pids``
controller bounds a tree whatever its uid; the ``memory`` controller bounds the tree's memory
together (``RLIMIT_AS`` bounds each process's address space, which a tree of many small
processes, or one runtime that reserves much and touches little, gets wrong); and the cgroup
names every process of the command, so ending them all is one loop over ``cgroup.procs`` (v1) or
one write to ``cgroup.kill`` (v2), whatever each did to its session or process group.

Where (each command gets its own, ``mnemon-<pid>-<n>``, removed when it ends):

- cgroup v1 (a ``pids`` and a ``memory`` hierarchy under ``/sys/fs/cgroup``): under mnemon's
  own cgroup in each hierarchy, as ``/proc/self/cgroup`` names it;
- cgroup v2 (``/sys/fs/cgroup/cgroup.controllers``): under ``MNEMON_CGROUP`` when set (a
  delegated cgroup of your own, holding no process, with ``pids`` and ``memory`` in its
  ``cgroup.subtree_control``), else under mnemon's own cgroup when its controllers can be
  enabled for children — which a cgroup holding processes cannot do (the v2 "no internal
  processes" rule), so on a systemd machine give mnemon a delegated one.

Where neither works (no write access, no controllers), ``open_cgroup`` answers None and the runner
falls back to ``RLIMIT_AS`` for memory and leaves processes unbounded — said in every answer,
never silently (``ShellOutcome.unbounded``). Synchronous: a few small writes to cgroupfs, taken
on the Trio thread.
"""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path
from typing import Literal

__all__ = ["Cgroup", "open_cgroup"]

ROOT = Path("/sys/fs/cgroup")
#: the variable naming a delegated cgroup v2 directory to put commands under
ENV_VAR = "MNEMON_CGROUP"
PREFIX = "mnemon-"
#: a command's CPU weight against mnemon's own threads and the machine's other work — a quarter
#: of the default (v1 ``cpu.shares`` 1024, v2 ``cpu.weight`` 100): however many commands spin,
#: the harness's loop is scheduled first when it wakes (``bench/sandbox.py``)
CPU_SHARES = 256
CPU_WEIGHT = 25

_counter = itertools.count(1)


class Cgroup:
    """One command's cgroup: a directory per controller (v1) or one directory (v2).

    ``bounded``: what it bounds (``processes``, ``memory``). The launcher writes its own pid into
    each of ``procs_files`` before it starts the command, so every process the command makes is
    in it from the first."""

    __slots__ = ("version", "dirs", "bounded")

    def __init__(self, version: Literal[1, 2], dirs: dict[str, Path], bounded: tuple[str, ...]):
        self.version = version
        self.dirs = dirs  # controller ("pids", "memory", or "unified") -> directory
        self.bounded = bounded

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def pids(self) -> list[int]:
        """The processes in it now (each controller's list, merged)."""
        found: set[int] = set()
        for f in self.procs_files:
            try:
                found.update(int(x) for x in f.read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process in it, one pass. v2: ``cgroup.kill`` (the kernel's own, which
        misses nothing); else each pid of ``cgroup.procs`` — a pass can miss a child forked
        meanwhile, so the runner repeats it until the cgroup is empty (``run._end``), and the
        ``pids`` bound keeps a bomb from outrunning the passes."""
        kill_file = self.dirs.get("unified", Path("/nonexistent")) / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            try:
                kill_file.write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def hits(self) -> tuple[str, ...]:
        """The bounds the command ran into: ``processes`` when a fork was refused, ``memory`` when
        the kernel killed a process of it for memory."""
        out = []
        events = self._read("pids", "pids.events")
        if _count(events, "max") > 0:
            out.append("processes")
        if self.version == 1:
            oom = self._read("memory", "memory.oom_control")
            if _count(oom, "oom_kill") > 0:
                out.append("memory")
        elif _count(self._read("memory", "memory.events"), "oom_kill") > 0:
            out.append("memory")
        return tuple(out)

    def remove(self) -> bool:
        """Remove its directories (each once it is empty); True when all are gone."""
        done = True
        for d in self.dirs.values():
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        return done

    def _read(self, controller: str, name: str) -> str:
        d = self.dirs.get(controller) or self.dirs.get("unified")
        if d is None:
            return ""
        try:
            return (d / name).read_text()
        except OSError:
            return ""


def _count(text: str, key: str) -> int:
    """The number after ``key`` in a flat-keyed cgroup file (``max 3``, ``oom_kill 1``)."""
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            try:
                return int(v)
            except ValueError:
                return 0
    return 0


def own_paths(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` read: controller (v1's names; ``""`` for v2) → the cgroup's path."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctl in parts[1].split(",") if parts[1] else [""]:
            out[ctl] = parts[2]
    return out


def open_cgroup(memory_bytes: int, processes: int, *, root: Path = ROOT,
                self_cgroup: str | None = None, environ: dict[str, str] | None = None
                ) -> Cgroup | None:
    """A new cgroup bounding ``processes`` and ``memory_bytes`` (v1 or v2, as the machine has),
    or None where none can be made (``root``, ``self_cgroup`` and ``environ`` stand in for the
    machine's, in tests)."""
    env = os.environ if environ is None else environ
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    mine = own_paths(self_cgroup)
    name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    if (root / "cgroup.controllers").exists():
        base = Path(env[ENV_VAR]) if env.get(ENV_VAR) else root / mine.get("", "/").lstrip("/")
        return _open_v2(base, name, memory_bytes, processes)
    if (root / "pids" / "cgroup.procs").exists():
        return _open_v1(root, mine, name, memory_bytes, processes)
    return None


def _open_v1(root: Path, mine: dict[str, str], name: str, memory_bytes: int,
             processes: int) -> Cgroup | None:
    """One directory per controller, each under mnemon's own cgroup of that hierarchy: ``pids``
    (without it, none: the process bound is the one root cannot have otherwise), then
    ``memory`` and ``cpu`` where they are mounted and writable."""
    made: dict[str, Path] = {}
    cg = Cgroup(1, made, ())
    pids = _v1_child(root, "pids", mine, name, {"pids.max": str(processes)})
    if pids is None:
        return None
    made["pids"] = pids
    bounded = ["processes"]
    memory = _v1_child(root, "memory", mine, name, {
        "memory.limit_in_bytes": str(memory_bytes),
        # memory and swap together, so the bound is not moved to swap (where swap is counted)
        "memory.memsw.limit_in_bytes?": str(memory_bytes)})
    if memory is not None:
        made["memory"] = memory
        bounded.append("memory")
    cpu = _v1_child(root, "cpu", mine, name, {"cpu.shares": str(CPU_SHARES)})
    if cpu is not None:
        made["cpu"] = cpu
    cg.bounded = tuple(bounded)
    return cg


def _v1_child(root: Path, controller: str, mine: dict[str, str], name: str,
              files: dict[str, str]) -> Path | None:
    """``name`` made under mnemon's own cgroup of one v1 hierarchy, its ``files`` written (a
    name ending in ``?`` only where the kernel has it); None, and nothing left, where it cannot
    be."""
    base = root / controller / mine.get(controller, "/").lstrip("/")
    if not (base / "cgroup.procs").exists():
        return None
    _sweep(base)
    d = base / name
    try:
        d.mkdir()
    except OSError:
        return None
    try:
        for f, value in files.items():
            if f.endswith("?"):
                f = f[:-1]
                if not (d / f).exists():
                    continue
            (d / f).write_text(value)
    except OSError:
        try:
            d.rmdir()
        except OSError:
            pass
        return None
    return d


def _open_v2(base: Path, name: str, memory_bytes: int, processes: int) -> Cgroup | None:
    d = base / name
    try:
        _sweep(base)
        d.mkdir()
    except OSError:
        return None
    cg = Cgroup(2, {"unified": d}, ())
    try:
        if not (d / "pids.max").exists() or not (d / "memory.max").exists():
            (base / "cgroup.subtree_control").write_text("+pids +memory")
        (d / "pids.max").write_text(str(processes))
        (d / "memory.max").write_text(str(memory_bytes))
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")
    except OSError:
        cg.remove()
        return None
    try:  # the CPU weight where the cpu controller is enabled too (a priority, not a bound)
        if (d / "cpu.weight").exists():
            (d / "cpu.weight").write_text(str(CPU_WEIGHT))
    except OSError:
        pass
    cg.bounded = ("processes", "memory")
    return cg


def _sweep(base: Path) -> None:
    """Remove the empty cgroups a mnemon that is gone left under ``base`` (a SIGKILLed mnemon
    cannot remove its own; its commands died with it, so their cgroups are empty). Done at each
    command: a listing of a few entries, and a leftover whose processes were still dying the
    last time goes at the next."""
    try:
        entries = list(base.iterdir())
    except OSError:
        return
    for d in entries:
        if not d.name.startswith(PREFIX) or not d.is_dir():
            continue
        pid = d.name[len(PREFIX):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            d.rmdir()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
