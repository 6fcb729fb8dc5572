"""What every surface shows of an agent's workspace at a turn (``WorkspaceView``): read-only,
from the agent's log and the run's store, never from a live agent.

``mnemon workspace DIR``, the service's ``/v1/agents/{id}/workspace`` routes, the page and
``mnemon results --patch`` all read through this one object, so "the files at turn N" means the
same on each (``history.History.at``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...errors import UserError
from ...lineage.places import agent_dir, agent_of
from .history import History, history_of_lines, read_history
from .store import EMPTY_TREE, Entry, Store, store_of

__all__ = ["WorkspaceView", "NoWorkspace", "view_of", "view_of_agent"]


class NoWorkspace(UserError):
    """The agent was started without a workspace (or the turn asked is not in its log)."""


class WorkspaceView:
    """An agent's workspace as its log and the run's store hold it."""

    def __init__(self, run_root: Path, agent: str, history: History):
        self.run_root = run_root
        self.agent = agent
        self.history = history
        self.store: Store = store_of(run_root)
        if not history.exists:
            raise NoWorkspace(f"agent {agent} has no workspace (it was started without one)")
        if not self.store.exists():
            raise NoWorkspace(f"the run root {run_root} has no workspace store "
                              "(workspace/store.git is missing)")

    # ------------------------------------------------------------------ where and when

    def snapshot(self, turn: int | None = None, *, latest: bool = True) -> str:
        """The snapshot after turn ``turn`` (None: the latest, or with ``latest=False`` the
        starting one)."""
        if turn is None:
            snap = self.history.latest if latest else self.history.at(None)
        else:
            snap = self.history.at(turn)
        if snap is None:
            raise NoWorkspace(f"agent {self.agent}'s log names no workspace at turn {turn}")
        return snap

    def turns(self) -> list[dict]:
        """Each workspace record in log order: ``{turn, snapshot, why, aside?, source?}``."""
        out = []
        for r in self.history.records:
            row: dict = {"turn": r.turn, "snapshot": r.snapshot, "why": r.why or "tools"}
            if r.aside:
                row["aside"] = r.aside
            if r.source:
                row["source"] = r.source
            if r.dir:
                row["dir"] = r.dir
            out.append(row)
        return out

    def changes(self) -> list[dict]:
        """Per recorded change, what it did to the files: ``{turn, why, from, to, files:
        [{status, path}]}`` (what the page shows in each turn of the conversation)."""
        out = []
        prev: str | None = None
        for r in self.history.records:
            if prev is not None and r.snapshot != prev:
                files = [{"status": s, "path": p} for s, p in self.store.changed(prev, r.snapshot)]
                out.append({"turn": r.turn, "why": r.why or "tools", "from": prev,
                            "to": r.snapshot, "files": files})
            prev = r.snapshot
        return out

    # ------------------------------------------------------------------ reading

    def ls(self, turn: int | None = None) -> list[Entry]:
        return self.store.entries(self.snapshot(turn))

    def show(self, path: str, turn: int | None = None) -> bytes:
        from .confine import clean

        snap = self.snapshot(turn)
        rel = "/".join(clean(path))
        e = self.store.entry(snap, rel)
        if e is None:
            raise NoWorkspace(f"{path} is not in the workspace at "
                              f"{'the latest snapshot' if turn is None else f'turn {turn}'}")
        if e.kind == "dir":
            raise NoWorkspace(f"{path} is a directory; ls shows what is in it")
        return self.store.blob(e.oid)

    def diff(self, frm: int | None = None, to: int | None = None, *,
             from_snapshot: str | None = None, to_snapshot: str | None = None) -> str:
        """The unified diff between two turns (default: from the start to the latest)."""
        return self.store.diff(*self._diff_ends(frm, to, from_snapshot, to_snapshot))

    def diff_bytes(self, frm: int | None = None, to: int | None = None) -> bytes:
        """``diff`` as git wrote it: bytes, so a file that is not UTF-8 keeps its own bytes
        and the patch still applies (``mnemon workspace DIR diff`` into a pipe)."""
        return self._raw_diff(*self._diff_ends(frm, to, None, None))

    def _diff_ends(self, frm: int | None, to: int | None, from_snapshot: str | None,
                   to_snapshot: str | None) -> tuple[str, str]:
        a = from_snapshot or (self.snapshot(frm) if frm is not None
                              else self.snapshot(latest=False))
        b = to_snapshot or self.snapshot(to)
        return a, b

    def patch(self, *, against: str = "source", turn: int | None = None) -> str:
        """The agent's change as a unified diff ``git apply`` takes: against where it started
        (``source``: a root's source or a child's fork point) or its parent's files now
        (``parent``)."""
        return self.store.diff(*self._patch_ends(against, turn))

    def patch_bytes(self, *, against: str = "source", turn: int | None = None,
                    to_snapshot: str | None = None) -> bytes:
        """``patch`` as git wrote it, in bytes (see ``diff_bytes``); ``to_snapshot``: up to
        this snapshot instead of the turn's (a results row names the one its task ended on)."""
        base, end = self._patch_ends(against, turn)
        return self._raw_diff(base, to_snapshot or end)

    def _patch_ends(self, against: str, turn: int | None) -> tuple[str, str]:
        end = self.snapshot(turn)
        if against == "parent":
            start = self.history.start
            src = start.source if start is not None else None
            if not src or not src.startswith("inherit:"):
                raise NoWorkspace(f"agent {self.agent} did not start from a parent's files")
            parent = view_of_agent(self.run_root, src.split(":", 1)[1])
            base = parent.snapshot()
        elif against == "source":
            base = self.snapshot(latest=False)
        else:
            raise UserError(f"patch is against 'source' or 'parent', not {against!r}")
        return base, end

    def _raw_diff(self, a: str, b: str) -> bytes:
        # the arguments of ``Store.diff``, its output left undecoded
        return self.store.git("diff-tree", "-r", "-p", "--no-color", "--no-ext-diff",
                              "--full-index", "--binary", "-U3", a, b).stdout

    def last_turn(self) -> int | None:
        """The last turn the log shows after the workspace was made (None: none yet): a
        ``--turn`` past it names files that do not exist yet."""
        known = self.history.known_turns()
        return known[-1] if known else None

    def export(self, to: Path, turn: int | None = None) -> int:
        """Write the files at ``turn`` into ``to`` (a new or empty directory); the count."""
        to = Path(to).absolute()  # git runs in the directory: a relative path would nest
        if to.exists() and (not to.is_dir() or any(os.scandir(to))):
            raise UserError(f"{to} exists and is not an empty directory")
        snap = self.snapshot(turn)
        tmp_index = self.store.indexes / f".export-{os.getpid()}"
        try:
            self.store.checkout(snap, to, tmp_index)
        except BaseException:
            if to.exists() and not any(os.scandir(to)):
                shutil.rmtree(to, ignore_errors=True)
            raise
        finally:
            tmp_index.unlink(missing_ok=True)
        return sum(1 for e in self.store.entries(snap) if e.kind != "dir")


def check_log(run_root: Path, log: Path) -> list[tuple[int, str]]:
    """What ``mnemon verify`` says of a log's workspace records: ``(line, error)`` for a
    snapshot id that is not a tree in the run's store (a store deleted, pruned or from another
    run), or workspace records with no store at all."""
    from .history import _SNAP
    from .store import is_snapshot_id

    named: list[tuple[int, str]] = []
    with open(log, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw.startswith(_SNAP):
                h = history_of_lines([raw])
                for r in h.records:
                    named += [(n, o) for o in (r.snapshot, r.aside) if o]
    if not named:
        return []
    out = [(n, f"workspace snapshot {o!r} is not a snapshot id") for n, o in named
           if not is_snapshot_id(o)]
    named = [(n, o) for n, o in named if is_snapshot_id(o)]
    store = store_of(run_root)
    if not store.exists():
        return out + [(named[0][0], "the log names workspace snapshots but the run root has "
                                    "no store (workspace/store.git is missing)")] if named else out
    missing = set(store.trees_missing(sorted({o for _, o in named} - {EMPTY_TREE})))
    out += [(n, f"workspace snapshot {o} is not in the run's store") for n, o in named
            if o in missing]
    return sorted(out)


def view_of_agent(run_root: Path, agent: str) -> WorkspaceView:
    log = agent_dir(run_root, agent) / "record.jsonl"
    if not log.is_file():
        raise NoWorkspace(f"there is no agent {agent} in {run_root}")
    return WorkspaceView(run_root, agent, read_history(log))


def view_of(path: Path) -> WorkspaceView:
    """The view of the agent whose directory (``<run root>/agents/<id>``) is ``path``."""
    run_root, agent = agent_of(path)
    return view_of_agent(run_root, agent)


