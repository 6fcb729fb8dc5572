"""A workspace's life beside its agent's: made for a root, forked for a child, reopened from a
log — each answering the ``WorkspaceSnapshot`` record the agent's log opens it with.

The supervisor calls these and appends the records; nothing here writes a log. A reopened
agent's workspace is rebuilt from its log alone (``reopen``): where it lives, what it last
recorded — never from a live object.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from ...errors import ConfigError
from ...lineage.runroot import now_iso
from ...session.records import WorkspaceSnapshot
from .handle import Inherit, Workspace
from .history import History
from .spec import WorkspaceSpec
from .store import EMPTY_TREE, Store, store_of

__all__ = ["open_root", "open_child", "reopen", "source_tree", "now_iso", "rewind",
           "apply_children"]

_SOURCES: dict[tuple[str, str], str] = {}
_SOURCES_LOCK = threading.Lock()




def _blocked(store: Store, directory: Path) -> tuple[str, ...]:
    """The run root's path inside ``directory`` when it lies there (``--workspace .`` with the
    run under it): excluded from snapshots and refused to the tools."""
    try:
        rel = store.run_root.resolve().relative_to(directory.resolve())
    except ValueError:
        return ()
    if not rel.parts:
        raise ConfigError(f"the workspace {directory} is the run root itself; give the run its "
                          "own directory (--run-root)")
    r = rel.as_posix()
    store.ensure()
    excl = store.git_dir / "info" / "exclude"
    excl.parent.mkdir(parents=True, exist_ok=True)
    line = f"/{r}/\n"
    have = excl.read_text() if excl.exists() else ""
    if line not in have:
        with open(excl, "a") as f:
            f.write(line)
    return (r,)


def source_tree(store: Store, source: str) -> str:
    """The snapshot of a source — a git repository's last commit, or a directory's files —
    imported once per run root and process."""
    p = Path(source).expanduser()
    if not p.is_dir():
        raise ConfigError(f"workspace source {source} is not a directory", key="source")
    key = (str(store.git_dir), str(p.resolve()))
    with _SOURCES_LOCK:
        if key in _SOURCES:
            return _SOURCES[key]
    # one import at a time per store, across processes too (Dask workers share the run root):
    # git cannot fetch into one repository from two processes at once (its ``shallow.lock``)
    store.ensure()
    fd = os.open(store.base / ".source.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if (p / ".git").exists():
            tree = store.import_repo(p)
        else:
            tree = store.import_dir(p)
    finally:
        os.close(fd)
    with _SOURCES_LOCK:
        _SOURCES[key] = tree
    return tree


def open_root(run_root: Path, agent: str,
              spec: WorkspaceSpec) -> tuple[Workspace, WorkspaceSnapshot]:
    """A root agent's workspace, and the record that opens it in the log."""
    store = store_of(run_root)
    store.ensure()
    if spec.dir is not None:
        d = Path(spec.dir).expanduser()
        if not d.is_dir():
            raise ConfigError(f"workspace {spec.dir} is not a directory", key="workspace")
        d = d.resolve()
        ws = Workspace(store, agent, tree=EMPTY_TREE, directory=d, in_place=True,
                       inherit=spec.inherit, blocked=_blocked(store, d))
        ws.claim()
        store.index_of(agent).unlink(missing_ok=True)
        tree = store.snapshot_dir(d, ws.index, None)
        ws.tree = ws.recorded = ws.start = ws.source_tree = tree
        return ws, WorkspaceSnapshot(snapshot=tree, why="start", dir=str(d),
                                     source=f"dir:{d}", at=now_iso())
    if spec.source is not None:
        tree = source_tree(store, spec.source)
        src = f"copy:{Path(spec.source).expanduser().resolve()}"
    else:
        tree, src = EMPTY_TREE, "empty"
    ws = Workspace(store, agent, tree=tree, inherit=spec.inherit, source_tree=tree)
    return ws, WorkspaceSnapshot(snapshot=tree, why="start", source=src, at=now_iso())


def open_child(parent: Workspace, agent: str,
               mode: Inherit | None = None) -> tuple[Workspace, WorkspaceSnapshot]:
    """A child's workspace by reference: its parent's files as they stand now (the parent's
    touched paths made a snapshot first, in this thread: a fork happens inside a tool call,
    and the parent's turn has usually snapshotted already), the empty tree, or the source."""
    mode = mode or parent.inherit
    ws = parent.child(agent, mode)
    tree = ws.tree
    src = f"inherit:{parent.agent}" if mode == "inherit" else mode
    return ws, WorkspaceSnapshot(snapshot=tree, why="start", source=src, at=now_iso())


def reopen(run_root: Path, agent: str, history: History,
           spec: WorkspaceSpec | None) -> Workspace | None:
    """The workspace of an agent reopened from its log (a crash, a restart, the service's
    resume): where it lives and the snapshot it last recorded, from the log's records alone.
    ``Workspace.reconcile`` then brings the directory back to that snapshot."""
    if not history.exists:
        return None
    store = store_of(run_root)
    latest = history.latest or EMPTY_TREE
    start = history.start
    source_tree = start.snapshot if start is not None else latest
    inherit: Inherit = spec.inherit if spec is not None else "inherit"
    if history.dir is not None:
        d = Path(history.dir)
        if not d.is_dir():
            raise ConfigError(f"agent {agent}'s workspace {d} is gone (its log names it)")
        ws = Workspace(store, agent, tree=latest, directory=d, in_place=True, inherit=inherit,
                       source_tree=source_tree, blocked=_blocked(store, d))
        ws.claim()
    else:
        d = store.tree_dir(agent)
        made = d.is_dir() and any(os.scandir(d))
        ws = Workspace(store, agent, tree=latest, directory=d if made else None,
                       inherit=inherit, source_tree=source_tree)
        if made:
            ws.sparse = not store.full_marker(agent).exists()
            ws.claim()
    ws.start = start.snapshot if start is not None else latest
    ws.recorded = latest
    return ws


def rewind(ws: Workspace, log: Path, to: int) -> WorkspaceSnapshot | None:
    """``/rewind N``: the workspace brought back to its snapshot after turn ``to`` (from the
    log's history); the record to append, or None when it stands there already."""
    from .history import read_history

    target = read_history(log).at(to)
    if target is None:
        return None
    if target == ws.recorded and not ws.changed:
        return None
    held = ws.holds
    ws.claim()  # an ended agent's directory may be another's by now: refused, not clobbered
    try:
        ws.restore_now(target)
    finally:
        if not held:
            ws.release()
    return WorkspaceSnapshot(snapshot=target, turn=to, why="rewind", at=now_iso())


async def apply_children(ws: Workspace, children: list) -> WorkspaceSnapshot:
    """Apply ended agents' changes (each from where its workspace started to its last
    snapshot) onto ``ws`` as three-way merges, all or nothing (``Workspace.apply``); answers
    the ``merge`` record to append. ``children``: agents (``AgentNode``) that have ended."""
    from ...errors import UserError

    changes = []
    for c in children:
        cw = c.workspace
        if cw is None:
            raise UserError(f"agent {c.id} has no workspace")
        if c.state == "running":
            raise UserError(f"agent {c.id} is still running: wait for it first")
        changes.append((c.id, cw.start, cw.recorded))
    merged = await ws.apply(changes)
    return WorkspaceSnapshot(snapshot=merged, why="merge",
                             source=",".join(c.id for c in children), at=now_iso())
