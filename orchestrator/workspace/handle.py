"""One agent's workspace (``Workspace``): where its files are, what its log last recorded, and
every operation its tools, its turns and its lineage perform on it.

A workspace is a snapshot in the run's store (``store.Store``) plus, once something writes, a
directory. Until then it *is* the snapshot: a forked child's reads, listings and searches are
answered from the store, so a child that only reads costs no copy (fork by reference, as its
context is). Its first write makes its directory (``directory()``: a checkout of the snapshot
under ``<run root>/workspace/trees/<agent>``) — or, for a root started on the user's own
directory (``--workspace DIR``), the directory is the user's, worked in place.

The file tools tell the workspace exactly which paths they wrote (``touched``); a command that
may have changed anything says so (``touched_all``). At the end of a turn whose tools changed
something, ``turn_snapshot`` makes the directory's tree (git re-reads only what was touched, or
everything through its stat cache) and answers it when it differs from the last one recorded:
the loop then records a ``WorkspaceSnapshot``. A turn that touched nothing costs nothing.

All store operations of one workspace run one at a time (``_lock``): a read beside a write in
the same response never sees git's index half-written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from pathlib import Path
from typing import Literal

import trio

from ...errors import UserError
from ...session.errors import Refusal
from . import confine
from .store import EMPTY_TREE, Entry, Store, blob_id

__all__ = ["Inherit", "Workspace", "WorkspaceBusy", "Read"]

Inherit = Literal["inherit", "empty", "source"]


class WorkspaceBusy(UserError):
    """Another agent (of this process or another) works in the directory already."""


class Read:
    """What a read found: the bytes, the file's whole size, the path it resolved to and the
    snapshot that holds exactly these bytes (the recovery pointer)."""

    __slots__ = ("data", "size", "path", "snapshot")

    def __init__(self, data: bytes, size: int, path: str, snapshot: str):
        self.data, self.size, self.path, self.snapshot = data, size, path, snapshot


class Workspace:
    """One agent's workspace. Made by ``open_root`` / ``fork`` / ``reopen`` (``workspace.life``)."""

    def __init__(self, store: Store, agent: str, *, tree: str, directory: Path | None = None,
                 in_place: bool = False, inherit: Inherit = "inherit",
                 source_tree: str | None = None, blocked: tuple[str, ...] = ()):
        self.store = store
        self.blocked = blocked  # paths inside the directory that are not the workspace's
        self.agent = agent
        self.index = store.index_of(agent)
        self.dir = directory  # None: not made yet — reads come from the store
        # sparse: the directory holds only the files the tools wrote; every other file is the
        # snapshot's, read from the store (``directory()`` writes them all out for a command)
        self.sparse = False
        self.in_place = in_place  # the user's own directory (``--workspace DIR``)
        self.inherit: Inherit = inherit  # how this agent's children start
        self.source_tree = source_tree or tree  # the root's source (``inherit = "source"``)
        self.start = tree  # where it began (a child: its parent's files at the fork)
        self.tree = tree  # the tree the index (and the directory) matched at the last flush
        self.recorded = tree  # the last snapshot the log names
        self.dirty: set[str] = set()
        self.all_dirty = False
        self.index_ready = directory is not None
        self._lock = trio.Lock()
        self._lock_fd: int | None = None

    @property
    def run_root(self) -> Path:
        return self.store.run_root

    def __repr__(self) -> str:
        where = self.dir if self.dir is not None else "(not made yet)"
        return f"<workspace of {self.agent} at {self.tree[:12]} in {where}>"

    # ------------------------------------------------------------------ ownership

    def rename(self, agent: str) -> None:
        """A child not yet made on disk takes the id its log was finally born under."""
        if agent != self.agent and self.dir is None:
            self.agent = agent
            self.index = self.store.index_of(agent)

    def claim(self) -> None:
        """Hold the directory for this agent alone: two agents never write one directory. An
        advisory lock on the directory itself (``flock``), released when the agent ends."""
        if self.dir is None or self._lock_fd is not None:
            return
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise WorkspaceBusy(f"workspace {self.dir} is in use by another agent; give "
                                    "this one its own directory (or a copy: a job's "
                                    "[workspace] source)") from None
            raise
        self._lock_fd = fd

    @property
    def holds(self) -> bool:
        """Whether this agent holds its directory's lock now."""
        return self._lock_fd is not None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ the directory

    async def directory(self) -> Path:
        """The workspace as a real, writable directory holding every file — written out now
        if it was not (a command in it needs them all: the shell). The file tools never need
        it: a child that only writes files through them keeps just what it wrote."""
        async with self._lock:
            return await self._directory(full=True)

    async def _directory(self, *, full: bool = False) -> Path:
        if self.dir is None:
            d = self.store.tree_dir(self.agent)
            if d.exists() and any(os.scandir(d)):
                raise WorkspaceBusy(f"{d} already holds files no record names")
            d.mkdir(parents=True, exist_ok=True)
            self.dir = d
            self.sparse = True
            self.claim()
        if full and self.sparse:
            await self._ensure_index()
            await self._flush()
            # every file of the snapshot the directory lacks (the ones written stay as they are)
            await trio.to_thread.run_sync(lambda: self.store.git(
                "checkout-index", "-a", "-q", index=self.index, work_tree=self.dir,
                ok=(0, 1)))
            self.sparse = False
            self.store.full_marker(self.agent).touch()
        return self.dir

    def _clear_sparse(self) -> None:
        """A sparse directory back to "nothing written": every file is the snapshot's."""
        assert self.dir is not None
        for entry in os.scandir(self.dir):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)

    def touched(self, path: str) -> None:
        self.dirty.add(path)

    def touched_all(self) -> None:
        """A command ran: anything in the directory may have changed (``add -A`` at the flush)."""
        self.all_dirty = True

    @property
    def changed(self) -> bool:
        return self.all_dirty or bool(self.dirty)

    # ------------------------------------------------------------------ snapshots

    async def _ensure_index(self) -> None:
        if not self.index_ready:
            await trio.to_thread.run_sync(self.store.load_index, self.index, self.tree)
            self.index_ready = True

    async def _flush(self, *, everything: bool = False) -> str:
        """``flush_now`` off the event loop (the caller holds ``_lock``)."""
        if self.dir is None or not (everything or self.changed):
            return self.tree
        return await trio.to_thread.run_sync(lambda: self.flush_now(everything=everything))

    async def current(self, *, everything: bool = False) -> str:
        """The snapshot of the workspace as it stands (flushed first)."""
        async with self._lock:
            return await self._flush(everything=everything)

    async def turn_snapshot(self) -> str | None:
        """At a turn's end: the new snapshot when the turn's tools changed the workspace since
        the last one recorded, else None (and nothing was read)."""
        if not self.changed:
            return None
        async with self._lock:
            tree = await self._flush()
        if tree == self.recorded:
            return None
        self.recorded = tree
        return tree

    async def restore(self, tree: str) -> None:
        """Bring the workspace to snapshot ``tree`` (a rewind, a resume, a merge): the
        directory's files that differ are rewritten, the ones it lacks removed."""
        async with self._lock:
            await trio.to_thread.run_sync(self._restore, tree)

    def restore_now(self, tree: str) -> None:
        """``restore`` from outside the agent's turn (a rewind by its user, between turns), in
        the caller's thread: refused while one of its tools is at work on the workspace."""
        if self._lock.locked():
            raise Refusal(f"agent {self.agent}'s tools are using its workspace; rewind it "
                          "after the call")
        self._restore(tree)

    def _restore(self, tree: str) -> None:
        if self.dir is None:
            self.index_ready = False
        elif self.sparse:  # nothing written: every file is the snapshot's
            self._clear_sparse()
            self.dirty.clear()
            self.index_ready = False
        else:
            self.flush_now(everything=True)  # the index describes the directory as it is
            self.store.restore(self.dir, self.index, tree)
        self.tree = self.recorded = tree

    async def reconcile(self) -> str | None:
        """A reopened agent (a crash, a restart): the directory is brought back to the snapshot
        its log names last. What the directory held beyond that (the crashed turn's writes, or
        anyone's) is kept in the store and answered — named, not silently lost or kept."""
        if self.dir is None or not self.dir.exists():
            if self.dir is not None:  # made after the last record, then removed: make it anew
                self.dir = None
            return None
        async with self._lock:
            self.index_ready = False
            self.index.unlink(missing_ok=True)
            await self._ensure_index()  # the index of the recorded snapshot (a fresh stat cache)
            if self.sparse:  # what is on disk was written over the recorded snapshot
                written = await trio.to_thread.run_sync(_files_under, self.dir)
                self.dirty.update(written)
                now = await self._flush()
                if now == self.recorded:
                    return None
                await trio.to_thread.run_sync(self._clear_sparse)
                self.dirty.clear()
                self.tree = self.recorded
                self.index_ready = False
                return now
            now = await self._flush(everything=True)
            if now == self.recorded:
                return None
            await trio.to_thread.run_sync(self.store.restore, self.dir, self.index,
                                          self.recorded)
            self.tree = self.recorded
            return now

    # ------------------------------------------------------------------ lineage

    def flush_now(self, *, everything: bool = False) -> str:
        """Make ``tree`` the directory's tree now, in the caller's thread: git re-reads only
        what the tools touched, or (``everything``, or after a command) the whole directory
        through its stat cache — never in a sparse directory, which holds only what was
        written. Most often a flag test (a fork inside a tool call, after the turn's
        snapshot)."""
        if self.sparse:
            everything = False
            self.all_dirty = False
        if self.dir is None or not (everything or self.changed):
            return self.tree
        paths = None if (everything or self.all_dirty) else sorted(self.dirty)
        self.dirty.clear()
        self.all_dirty = False
        if not self.index_ready:
            self.store.load_index(self.index, self.tree)
            self.index_ready = True
        self.tree = self.store.snapshot_dir(self.dir, self.index, paths)
        return self.tree

    def child(self, agent: str, mode: Inherit | None = None) -> "Workspace":
        """A child's workspace, by reference: this one's snapshot as it stands now (or the
        empty tree, or the root's source). Nothing is copied until the child writes."""
        mode = mode or self.inherit
        tree = (EMPTY_TREE if mode == "empty" else self.source_tree if mode == "source"
                else self.flush_now())
        return Workspace(self.store, agent, tree=tree, inherit=self.inherit,
                         source_tree=self.source_tree)

    async def fork(self, agent: str, mode: Inherit | None = None) -> "Workspace":
        """``child`` off the event loop, one store operation at a time."""
        async with self._lock:
            return await trio.to_thread.run_sync(self.child, agent, mode)

    async def apply(self, changes: list[tuple[str, str, str]]) -> str:
        """Apply other workspaces' changes onto this one, each ``(name, base, theirs)`` — the
        change from ``base`` to ``theirs`` (a synod member's from its fork to its end) — as
        three-way merges, in order, all or nothing: a conflict in any is
        ``store.MergeConflict`` naming the member and the paths, and nothing here changes.
        Answers the merged snapshot."""
        from .store import MergeConflict

        async with self._lock:
            ours = await self._flush(everything=self.dir is not None)
            merged = ours
            for name, base, theirs in changes:
                try:
                    merged = await trio.to_thread.run_sync(self.store.merge, base, merged,
                                                           theirs)
                except MergeConflict as e:
                    e.args = (f"{name}'s change conflicts with the workspace in "
                              f"{', '.join(e.paths[:10])}; nothing was applied",)
                    raise
        if merged != ours:
            await self.restore(merged)
        else:
            self.recorded = merged
        return merged

    # ------------------------------------------------------------------ reading

    async def read(self, path: str, *, at: str | None = None, limit: int | None = None) -> Read:
        """A file's bytes and the snapshot that holds exactly them. ``at``: read it as it stood
        in that snapshot (a recovery pointer) rather than now."""
        if self.sparse and at is None:
            tree = await self.current()  # what was written is in it; the rest is the snapshot's
            return await trio.to_thread.run_sync(self._read_tree, tree, path, limit)
        if at is not None or self.dir is None:
            return await trio.to_thread.run_sync(self._read_tree, at or self.tree, path, limit)
        async with self._lock:
            await self._flush()
            data, size, resolved = await trio.to_thread.run_sync(
                confine.read_bytes, self.dir, path, None, self.blocked)
            await self._ensure_index()
            self.tree = await trio.to_thread.run_sync(self._pin, resolved, data)
        if limit is not None:
            data = data[:limit]
        return Read(data, size, resolved, self.tree)

    def _pin(self, path: str, data: bytes) -> str:
        """The tree holding exactly ``data`` at ``path``: the current one when the index has
        that blob there, else the blob written and the index updated (a file changed behind
        the tools' back: the pointer still names the bytes that were read)."""
        oid = blob_id(data)
        out = self.store.git("ls-files", "-s", "-z", "--", f":(literal){path}", index=self.index,
                             work_tree=self.dir).stdout
        have = out.split(b"\0")[0].split() if out else []
        if len(have) >= 2 and have[1].decode() == oid:
            return self.tree
        mode = have[0].decode() if have else "100644"
        self.store.git("hash-object", "-w", "--stdin", input=data)
        self.store.git("update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}",
                       index=self.index, work_tree=self.dir)
        return self.store.git("write-tree", index=self.index,
                              work_tree=self.dir).stdout.decode().strip()

    def _read_tree(self, tree: str, path: str, limit: int | None) -> Read:
        parts = confine.clean(path)
        for _ in range(confine.MAX_HOPS):
            e = self.store.entry(tree, "/".join(parts))
            if e is None:
                # a directory symlinked on the way: resolve component by component
                parts = self._resolve_tree(tree, parts, path)
                e = self.store.entry(tree, "/".join(parts))
                if e is None:
                    raise confine.Confined(f"{path}: no such file")
            if e.kind == "symlink":
                target = self.store.blob(e.oid).decode("utf-8", "surrogateescape")
                parts = confine._resolve(parts[:-1], target, path)
                continue
            if e.kind == "dir":
                raise confine.Confined(f"{path} is a directory; fs_list shows what is in it")
            if e.kind != "file":
                raise confine.Confined(f"{path} is not a regular file")
            data = self.store.blob(e.oid)
            size = len(data)
            return Read(data if limit is None else data[:limit], size, "/".join(parts), tree)
        raise confine.OutsideWorkspace(f"{path}: too many symlinks")

    def _resolve_tree(self, tree: str, parts: list[str], shown: str) -> list[str]:
        done: list[str] = []
        for i, name in enumerate(parts[:-1]):
            e = self.store.entry(tree, "/".join(done + [name]))
            if e is None:
                raise confine.Confined(f"{shown}: no such file or directory")
            if e.kind == "symlink":
                target = self.store.blob(e.oid).decode("utf-8", "surrogateescape")
                return self._resolve_tree(tree, confine._resolve(done, target, shown)
                                          + parts[i + 1:], shown)
            done.append(name)
        return done + [parts[-1]]

    async def entries(self, at: str | None = None) -> tuple[str, list[Entry]]:
        """Every file of the workspace (now, or in snapshot ``at``) with its size."""
        tree = at or await self.current()
        return tree, await trio.to_thread.run_sync(self.store.entries, tree)

    # ------------------------------------------------------------------ writing

    async def write(self, path: str, data: bytes) -> str:
        """Replace or create a file, atomically; answers the path it resolved to."""
        async with self._lock:
            d = await self._directory()
            if self.sparse:  # a directory the snapshot has as a symlink is written through it
                await self._ensure_index()
                await trio.to_thread.run_sync(self._checkout_prefixes, path)
            resolved = await trio.to_thread.run_sync(
                lambda: confine.write_atomic(d, path, data, blocked=self.blocked))
            self.dirty.add(resolved)
            return resolved

    def _checkout_prefixes(self, path: str) -> None:
        """The symlinks among ``path``'s parent directories, written out of the snapshot into a
        sparse directory, so that a write follows them as it would in a whole checkout."""
        parts = confine.clean(path)
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if not prefixes:
            return
        links = [e.path for e in self.store.entries(self.tree, recursive=False,
                                                    pathspec=prefixes, sizes=False)
                 if e.kind == "symlink"]
        if links:
            self.store.git("checkout-index", "-q", "--", *links, index=self.index,
                           work_tree=self.dir, ok=(0, 1))


def _files_under(d: Path) -> list[str]:
    """Every file and symlink under ``d``, relative, ``/``-separated (a sparse directory)."""
    out: list[str] = []
    for root, dirs, files in os.walk(d):
        rel = os.path.relpath(root, d)
        for name in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            out.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
    return sorted(out)
