"""The run's snapshot store: git's object store in a private ``GIT_DIR`` under the run root.

Every workspace of a run keeps its history here (docs/workspace.md, decision 0355): a snapshot
is a git *tree* — content-addressed, so unchanged files and directories are shared between
turns, agents and synod members for free — and its content id is the tree's object id, which
the agent's log names in a ``WorkspaceSnapshot`` record. Each agent keeps a private index file
(``index/<agent>``): git's cache of what the directory held at the last snapshot, which is
what makes a snapshot of a 10 000-file tree with ten changed files a matter of milliseconds.

Why git: it is the established tool for exactly this (a content-addressed tree store with a
stat cache, three-way tree merges, unified diffs, checkout), it is on every machine a developer
uses, and its store works whether or not the user's directory is itself a repository: the
store's ``GIT_DIR`` is ours alone, so the user's ``.git`` (if any) is never read or written.
The store is tuned for speed over size: objects are written uncompressed (a checkout of a
snapshot then costs a copy, not a decompression), automatic ``gc`` is off (a snapshot is
reachable only through a log, which git cannot see), and nothing of the user's git config is
read (``GIT_CONFIG_GLOBAL``/``NOSYSTEM``): a user's hooks, filters or ``autocrlf`` never touch a
workspace's bytes.

Every call here is a short, synchronous subprocess; ``handle.Workspace`` runs them in a worker
thread, so that an agent's event loop never waits on the disk.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ...errors import Failure, UserError

__all__ = ["EMPTY_TREE", "Entry", "Store", "StoreError", "MergeConflict", "blob_id",
           "is_snapshot_id", "store_of"]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree (sha1)

# the settings every call runs with: nothing of the user's config, and a store tuned for a
# copy-speed checkout (see the module's docstring)
_CONFIG = (
    "-c", "core.compression=0", "-c", "core.looseCompression=0", "-c", "gc.auto=0",
    "-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.symlinks=true",
    "-c", "core.fileMode=true", "-c", "core.quotePath=false", "-c", "safe.directory=*",
    "-c", "core.hooksPath=/dev/null", "-c", "checkout.workers=2",
    "-c", "core.precomposeUnicode=false", "-c", "core.excludesFile=/dev/null",
    "-c", "user.name=mnemon",
    "-c", "user.email=mnemon@localhost",
)


_FIXED_DATES = {"GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
                "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z"}


class StoreError(Failure):
    """git could not do what the store asked (a broken store, a full disk): exit 1."""


class MergeConflict(UserError):
    """A three-way merge whose sides changed the same lines: a named refusal (the paths)."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
        super().__init__(f"the change conflicts with the workspace in {shown}")


@dataclass(frozen=True)
class Entry:
    """One entry of a snapshot: its path, git mode (``100644``, ``100755``, ``120000`` a
    symlink, ``040000`` a directory, ``160000`` a nested repository), object id and size."""

    path: str
    mode: str
    oid: str
    size: int | None

    @property
    def kind(self) -> str:
        return {"120000": "symlink", "040000": "dir", "160000": "repository"}.get(
            self.mode, "file")


def blob_id(data: bytes) -> str:
    """The git object id of a blob holding ``data`` (sha1 of ``blob <n>\\0`` + data)."""
    h = hashlib.sha1(b"blob %d\0" % len(data))  # noqa: S324 — git's object id, not a secret
    h.update(data)
    return h.hexdigest()


def is_snapshot_id(s: object) -> bool:
    return isinstance(s, str) and len(s) == 40 and all(c in "0123456789abcdef" for c in s)


_STORES: dict[Path, "Store"] = {}
_STORES_LOCK = threading.Lock()


def store_of(run_root: Path) -> "Store":
    """The store of a run root, made on first use (one object per process and run root)."""
    key = Path(run_root).resolve()
    with _STORES_LOCK:
        s = _STORES.get(key)
        if s is None:
            s = _STORES[key] = Store(key)
        return s


class Store:
    """The snapshot store of one run root (``<run root>/workspace/store.git``)."""

    def __init__(self, run_root: Path):
        self.run_root = Path(run_root)
        self.base = self.run_root / "workspace"
        self.git_dir = self.base / "store.git"
        self.trees = self.base / "trees"
        self.indexes = self.base / "index"
        self._ready = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing

    def exists(self) -> bool:
        return (self.git_dir / "objects").is_dir()

    def ensure(self) -> None:
        """Make the store on first use (idempotent, safe between threads and processes)."""
        if self._ready:
            return
        with self._lock:
            if not self.exists():
                self.base.mkdir(parents=True, exist_ok=True)
                tmp = self.base / f".store-{os.getpid()}-{threading.get_ident()}"
                subprocess.run(["git", "init", "-q", "--bare", str(tmp)], check=True,
                               env=self._env(None, None), capture_output=True)
                try:
                    os.rename(tmp, self.git_dir)
                except OSError:  # another process made it first
                    subprocess.run(["rm", "-rf", str(tmp)], check=False)
            self.trees.mkdir(parents=True, exist_ok=True)
            self.indexes.mkdir(parents=True, exist_ok=True)
            self._ready = True

    def _env(self, index: Path | None, work_tree: Path | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_DIR=str(self.git_dir), GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=os.devnull, GIT_OPTIONAL_LOCKS="0",
                   GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        if work_tree is not None:
            env["GIT_WORK_TREE"] = str(work_tree)
        return env

    def git(self, *args: str, index: Path | None = None, work_tree: Path | None = None,
            input: bytes | None = None, ok: tuple[int, ...] = (0,),
            cwd: Path | None = None, timeout: float | None = None,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run one git command against the store; an exit code outside ``ok`` is a
        ``StoreError`` naming the command and git's own message."""
        self.ensure()
        env = self._env(index, work_tree)
        if extra_env:
            env.update(extra_env)
        try:
            p = subprocess.run(["git", *_CONFIG, *args], input=input, capture_output=True,
                               env=env, cwd=cwd or work_tree or self.base,
                               timeout=timeout)
        except FileNotFoundError as e:
            raise StoreError("the workspace needs git on PATH (apt-get install git)") from e
        if p.returncode not in ok:
            msg = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise StoreError(f"git {args[0]} failed ({p.returncode}): "
                             f"{msg[-1] if msg else 'no message'}")
        return p

    def popen(self, *args: str, index: Path | None = None,
              work_tree: Path | None = None) -> subprocess.Popen:
        """A git command whose output is read as it comes (a search stopped at its cap)."""
        self.ensure()
        return subprocess.Popen(["git", *_CONFIG, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=self._env(index, work_tree), cwd=work_tree or self.base)

    def index_of(self, agent: str) -> Path:
        self.ensure()
        return self.indexes / agent

    def full_marker(self, agent: str) -> Path:
        """Present once an agent's directory holds every file (not only those it wrote)."""
        self.ensure()
        return self.indexes / f"{agent}.full"

    def tree_dir(self, agent: str) -> Path:
        """Where an agent's workspace is made when it is not the user's own directory."""
        self.ensure()
        return self.trees / agent

    # ------------------------------------------------------------------ snapshots

    def snapshot_dir(self, directory: Path, index: Path, paths: list[str] | None = None) -> str:
        """The tree of ``directory`` now, written to the store. ``paths``: only these changed
        since the index was last made current (the file tools know exactly what they wrote):
        git re-reads just them; None re-reads the whole directory through the index's stat
        cache (``add -A``: a command may have changed anything). The user's ``.gitignore``
        files are honoured; ``.git`` is never taken."""
        if paths is None:
            self.git("add", "-A", "--ignore-errors", "--", ".", index=index, work_tree=directory,
                     ok=(0, 1))
        elif paths:
            self.git("update-index", "--add", "--remove", "-z", "--stdin", index=index,
                     work_tree=directory, input=b"\0".join(p.encode() for p in paths) + b"\0")
        return self.git("write-tree", index=index, work_tree=directory).stdout.decode().strip()

    def import_dir(self, directory: Path) -> str:
        """A directory's files as a snapshot (a job's ``source``): the whole tree hashed once."""
        tmp = self.indexes / f".import-{os.getpid()}-{threading.get_ident()}"
        try:
            return self.snapshot_dir(directory, tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def import_repo(self, repo: Path, rev: str = "HEAD") -> str:
        """A git repository's commit (``HEAD``: its last commit, not its uncommitted edits)
        as a snapshot: its objects are fetched into the store, its tree id answered."""
        self.git("fetch", "-q", "--no-tags", "--depth=1", str(repo),
                 f"+{rev}:refs/sources/{blob_id(str(repo).encode())[:12]}")
        return self.git("rev-parse", f"refs/sources/{blob_id(str(repo).encode())[:12]}^{{tree}}"
                        ).stdout.decode().strip()

    def load_index(self, index: Path, tree: str) -> None:
        """Make ``index`` describe ``tree`` (no files written)."""
        self.git("read-tree", tree, index=index)

    def checkout(self, tree: str, directory: Path, index: Path) -> None:
        """Write ``tree``'s files into a new, empty ``directory`` (a child's first write)."""
        directory.mkdir(parents=True, exist_ok=True)
        index.unlink(missing_ok=True)
        self.git("read-tree", "--reset", "-u", tree, index=index, work_tree=directory)

    def restore(self, directory: Path, index: Path, tree: str) -> None:
        """Bring ``directory`` to ``tree``: the files that differ rewritten, the ones ``tree``
        lacks removed (a rewind). The index must describe the directory as it is now (a
        snapshot was just taken); ignored files are left alone."""
        self.git("read-tree", "--reset", "-u", tree, index=index, work_tree=directory)

    # ------------------------------------------------------------------ reading

    def trees_missing(self, oids: list[str]) -> list[str]:
        """The ids among ``oids`` that are not trees in the store (one ``cat-file`` for all)."""
        if not oids:
            return []
        out = self.git("cat-file", "--batch-check=%(objectname) %(objecttype)",
                       input="".join(f"{o}\n" for o in oids).encode()).stdout.decode()
        bad = []
        for oid, line in zip(oids, out.splitlines()):
            parts = line.split()
            if len(parts) != 2 or parts[1] != "tree":
                bad.append(oid)
        return bad

    def has(self, oid: str) -> bool:
        return self.git("cat-file", "-e", oid, ok=(0, 1, 128)).returncode == 0

    def entries(self, tree: str, *, recursive: bool = True, pathspec: list[str] | None = None,
                sizes: bool = True) -> list[Entry]:
        """The entries of a snapshot (every file, recursively), with their sizes."""
        args = ["ls-tree", "-z", "--full-tree"]
        if recursive:
            args.append("-r")
        if sizes:
            args.append("-l")
        args.append(tree)
        if pathspec:
            args += ["--", *pathspec]
        out: list[Entry] = []
        for rec in self.git(*args).stdout.split(b"\0"):
            if not rec:
                continue
            meta, _, path = rec.partition(b"\t")
            parts = meta.split()
            size = int(parts[3]) if sizes and len(parts) > 3 and parts[3] != b"-" else None
            out.append(Entry(path.decode("utf-8", "surrogateescape"), parts[0].decode(),
                             parts[2].decode(), size))
        return out

    def entry(self, tree: str, path: str) -> Entry | None:
        """One path of a snapshot (a file, symlink or directory), or None."""
        for e in self.entries(tree, recursive=False, pathspec=[f":(literal){path}"]):
            if e.path == path:
                return e
        return None

    def blob(self, oid: str) -> bytes:
        return self.git("cat-file", "blob", oid).stdout

    def diff(self, a: str, b: str, *, paths: list[str] | None = None, stat: bool = False,
             context: int = 3) -> str:
        """The unified diff from snapshot ``a`` to ``b`` (git's format, binary files named)."""
        args = ["diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--full-index",
                "--binary", f"-U{context}", a, b] if not stat else \
            ["diff-tree", "-r", "--no-color", "--numstat", a, b]
        if paths:
            args += ["--", *paths]
        return self.git(*args).stdout.decode("utf-8", "replace")

    def changed(self, a: str, b: str) -> list[tuple[str, str]]:
        """``(status, path)`` for each path that differs from ``a`` to ``b`` (A, M, D, T)."""
        out = self.git("diff-tree", "-r", "-z", "--name-status", "--no-renames", a, b).stdout
        parts = [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]
        return [(parts[i][0], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]

    # ------------------------------------------------------------------ merging

    def _commit(self, tree: str, *parents: str) -> str:
        args = ["commit-tree", tree, "-m", "snapshot"]
        for p in parents:
            args += ["-p", p]
        # dates fixed: the same trees make the same commits, whenever merged
        return self.git(*args, extra_env=_FIXED_DATES).stdout.decode().strip()

    def merge(self, base: str, ours: str, theirs: str) -> str:
        """The three-way merge of two snapshots that both descend from ``base``: the merged
        tree, or ``MergeConflict`` naming the paths both changed incompatibly. Nothing on disk
        changes (git's ``merge-tree --write-tree``)."""
        if theirs == base or theirs == ours:
            return ours
        if ours == base:
            return theirs
        cb = self._commit(base)
        co = self._commit(ours, cb)
        ct = self._commit(theirs, cb)
        p = self.git("merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", co, ct,
                     ok=(0, 1))
        fields = p.stdout.split(b"\0")
        tree = fields[0].decode().strip()
        if p.returncode == 0:
            return tree
        conflicted = sorted({f.decode("utf-8", "replace") for f in fields[1:] if f})
        raise MergeConflict(conflicted or ["(unnamed paths)"])
