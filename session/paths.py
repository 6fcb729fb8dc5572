"""Paths inside a run root: what a Pointer's ``source`` may name, and opening it.

A Pointer names its log file relative to the run root (the on-disk format makes every path in a
record relative, so a run can be moved). Reading through one is confined to the run root: no
absolute path, no ``..``, no symlink out. ``lineage`` re-exports these for forks and ``verify``;
the door receives an opener built on them from its caller (``Sources``).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .errors import AncestorUnreadable


def confine(root: Path, source: str, *, resolved_root: Path | None = None) -> Path:
    """Resolve a pointer's source inside the run root, refusing anything that leads out.
    ``resolved_root``: ``root.resolve()``, when the caller already has it."""
    if not source or source.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", source):
        raise AncestorUnreadable(source, "a pointer must name a path relative to the run root")
    if "\x00" in source:
        raise AncestorUnreadable(repr(source), "a path may not contain a NUL byte")
    parts = tuple(p for p in source.split("/") if p and p != ".")  # as ``Path(source).parts``
    if ".." in parts:
        raise AncestorUnreadable(source, "a pointer may not leave the run root ('..')")
    root = resolved_root if resolved_root is not None else root.resolve()
    real = _beneath(root, parts)
    if real is not None:
        return real
    full = (root / source)
    try:
        real = full.resolve(strict=True)
    except (FileNotFoundError, OSError):
        raise AncestorUnreadable(source, "the ancestor file is missing") from None
    except RuntimeError:  # Python before 3.13 says a symlink loop so
        raise AncestorUnreadable(source, "the path is a symlink loop") from None
    if root != real and root not in real.parents:
        raise AncestorUnreadable(source, "the pointer leads outside the run root (symlink)")
    if not real.is_file():
        raise AncestorUnreadable(source, "the pointer names a directory or a special file, "
                                         "not a log")
    return real


def _beneath(real_root: Path, parts: tuple[str, ...]) -> Path | None:
    """The quick way to the same answer: a path with no symlink below the (resolved) run root
    is its own real path, so each of its components is ``lstat``-ed once (3 for an agent's log,
    where ``resolve`` walks every component from ``/``: 42–46 µs against 12–13 µs). None
    when the walk meets a symlink, a missing or unreadable component or anything but a file at
    the end: ``confine`` then resolves it the long way, and names what it finds."""
    path = str(real_root).rstrip("/")  # resolved: no trailing slash but the root's own
    st = None
    try:
        for part in parts:
            path = f"{path}/{part}"
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                return None
    except OSError:
        return None
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    return Path(path)


def check_loci(source: str, loci) -> None:
    """Refuse loci that cannot name a record (negative offsets, empty lengths)."""
    for locus in loci:
        off, length = locus[0], locus[1]
        if off < 0 or length <= 0:
            raise AncestorUnreadable(source, f"offset {off}, length {length} cannot name a record")


class Sources:
    """Opens the files pointers name, confined to one run root: ``sources(source)`` → a binary
    file. Each source is confined once (one ``realpath``), then opened afresh on each call.

    The door takes one of these (or any callable of the same shape) from its caller; it never
    finds ancestor files on its own. A supervisor keeps one for its run, so each log is
    confined once per run, not once per transcript call (two ``realpath`` walks each).
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self._paths: dict[str, Path] = {}
        self._real_root: Path | None = None

    def path(self, source: str) -> Path:
        p = self._paths.get(source)
        if p is None:
            if self._real_root is None:
                self._real_root = self.root.resolve()
            p = self._paths[source] = confine(self.root, source, resolved_root=self._real_root)
        return p

    def __call__(self, source: str):
        path = self.path(source)
        try:  # unbuffered: the door seeks to each record and reads it whole (a buffered file
            # costs a terminal check and a buffer per open, and reads ahead what is not wanted)
            return open(path, "rb", buffering=0)
        except FileNotFoundError:
            self._paths.pop(source, None)
            raise AncestorUnreadable(source, "the ancestor file is missing") from None
