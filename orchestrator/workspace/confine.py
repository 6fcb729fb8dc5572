"""Paths a model names, confined to its workspace — at the moment of use, not only when checked.

A path from a tool call is hostile (docs/workspace.md, "Confinement"). It must be relative, may
not climb (``..``), may not name git's own directory (``.git``: a hook planted in the user's
repository would run at their next commit), and may not reach outside the workspace through a
symlink. Checking a resolved path and then opening it by name leaves a window in which a
directory can be swapped for a symlink pointing out; so nothing here opens a path by name.
Every component is opened relative to the directory before it (``openat``) with
``O_NOFOLLOW``: a symlink is never followed by the kernel, only read (``readlinkat``) and, when
its target lies inside the workspace, walked again from the workspace's root, a bounded number
of times. A swap between two steps can then only make the walk fail or land on another file
inside — never outside.

Writes are atomic: the new bytes go to a fresh temporary file in the same directory, are made
durable, and replace the old file by ``rename`` — a crash (SIGKILL included) leaves the old file
or the new one, never a mix. ``rename`` replaces a symlink at the name rather than writing
through it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import secrets
import stat as st
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ...errors import UserError

__all__ = ["Confined", "OutsideWorkspace", "clean", "read_bytes", "write_atomic", "lstat",
           "remove"]

MAX_HOPS = 40  # symlinks followed in one walk (the kernel's own limit)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideWorkspace(UserError):
    """A path the workspace refuses: absolute, climbing, into ``.git``, or out by a symlink."""


class Confined(UserError):
    """A path inside the workspace that cannot be used as asked (a directory, missing…)."""


def clean(path: object) -> list[str]:
    """The components of a model's relative path, or ``OutsideWorkspace`` naming it."""
    if not isinstance(path, str) or not path.strip():
        raise OutsideWorkspace("a path must be a non-empty string relative to the workspace")
    if "\0" in path:
        raise OutsideWorkspace(f"{path!r} holds a NUL byte")
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise OutsideWorkspace(f"{path!r} is absolute; paths are relative to the workspace")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise OutsideWorkspace(f"{path!r} climbs out of the workspace ('..')")
    if any(p.lower() == ".git" for p in parts):
        raise OutsideWorkspace(f"{path!r} is inside .git, which the file tools do not touch")
    if not parts:
        raise OutsideWorkspace(f"{path!r} names the workspace itself, not a file in it")
    return parts


@contextmanager
def _root(root: Path) -> Iterator[int]:
    fd = os.open(root, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def _walk(root_fd: int, parts: list[str], shown: str, *, create: bool = False,
          hops: int = 0) -> tuple[int, str, list[str]]:
    """Open the directory holding ``parts[-1]``; answers ``(dir fd, name, resolved parts)``.
    The caller closes the fd. Symlinked directories inside the workspace are walked again from
    the root; one pointing out is ``OutsideWorkspace``."""
    fd = os.dup(root_fd)
    done: list[str] = []
    try:
        for i, name in enumerate(parts[:-1]):
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno == errno.ENOENT and create:
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                elif e.errno in (errno.ELOOP, errno.ENOTDIR):
                    target = _link(fd, name, shown)
                    if target is None:
                        raise Confined(f"{shown}: {'/'.join(done + [name])} is not a "
                                       "directory") from None
                    new = _resolve(done, target, shown) + parts[i + 1:]
                    os.close(fd)
                    fd = -1
                    if hops >= MAX_HOPS:
                        raise OutsideWorkspace(f"{shown}: too many symlinks") from None
                    return _walk(root_fd, new, shown, create=create, hops=hops + 1)
                elif e.errno == errno.ENOENT:
                    raise Confined(f"{shown}: no such file or directory") from None
                else:
                    raise
            os.close(fd)
            fd = nfd
            done.append(name)
        return fd, parts[-1], done + [parts[-1]]
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def _link(dir_fd: int, name: str, shown: str) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _resolve(where: list[str], target: str, shown: str) -> list[str]:
    """The parts a symlink at ``where/…`` leads to, inside the workspace, or a refusal."""
    if target.startswith("/"):
        raise OutsideWorkspace(f"{shown} leads outside the workspace (a symlink to {target!r})")
    joined = posixpath.normpath(posixpath.join("/".join(where) or ".", target))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        raise OutsideWorkspace(f"{shown} leads outside the workspace (a symlink to {target!r})")
    parts = [p for p in joined.split("/") if p not in ("", ".")]
    if any(p.lower() == ".git" for p in parts):
        raise OutsideWorkspace(f"{shown} leads into .git (a symlink to {target!r})")
    return parts


def _open_file(root_fd: int, parts: list[str], shown: str, flags: int,
               hops: int = 0) -> tuple[int, list[str]]:
    dfd, name, resolved = _walk(root_fd, parts, shown)
    try:
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd), resolved
        except OSError as e:
            if e.errno != errno.ELOOP:
                if e.errno == errno.ENOENT:
                    raise Confined(f"{shown}: no such file") from None
                if e.errno == errno.EISDIR:
                    raise Confined(f"{shown} is a directory") from None
                raise
            target = _link(dfd, name, shown)
    finally:
        os.close(dfd)
    if target is None or hops >= MAX_HOPS:
        raise OutsideWorkspace(f"{shown}: too many symlinks")
    return _open_file(root_fd, _resolve(resolved[:-1], target, shown), shown, flags, hops + 1)


def _check_blocked(resolved: list[str], blocked: tuple[str, ...], shown: str) -> None:
    """A path under one of ``blocked`` (the run root, when it lies inside the user's
    directory: the agent's own logs) is outside the workspace too."""
    joined = "/".join(resolved)
    for b in blocked:
        if joined == b or joined.startswith(b + "/"):
            raise OutsideWorkspace(f"{shown} is inside the run's own directory ({b}), which "
                                   "is not part of the workspace")


def read_bytes(root: Path, path: str, limit: int | None = None,
               blocked: tuple[str, ...] = ()) -> tuple[bytes, int, str]:
    """``(bytes, size, resolved path)`` of a file in the workspace; at most ``limit`` bytes
    read (the size is the whole file's)."""
    parts = clean(path)
    _check_blocked(parts, blocked, path)
    with _root(root) as rfd:
        fd, resolved = _open_file(rfd, parts, path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _check_blocked(resolved, blocked, path)
    except BaseException:
        os.close(fd)
        raise
    try:
        info = os.fstat(fd)
        if st.S_ISDIR(info.st_mode):
            raise Confined(f"{path} is a directory; fs_list shows what is in it")
        if not st.S_ISREG(info.st_mode):
            raise Confined(f"{path} is not a regular file")
        chunks = []
        left = info.st_size if limit is None else min(limit, info.st_size)
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks), info.st_size, "/".join(resolved)
    finally:
        os.close(fd)


def lstat(root: Path, path: str) -> os.stat_result | None:
    """The file's stat (its own, a symlink's target's inside the workspace), None if absent."""
    parts = clean(path)
    with _root(root) as rfd:
        try:
            fd, _ = _open_file(rfd, parts, path, os.O_RDONLY | os.O_NONBLOCK)
        except Confined:
            return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def write_atomic(root: Path, path: str, data: bytes, *, fsync: bool = True,
                 blocked: tuple[str, ...] = ()) -> str:
    """Replace (or create) a file in the workspace with ``data``, atomically; its parent
    directories are made. An existing file keeps its mode. Answers the resolved path (a
    symlink inside the workspace is written through to its target, confined like a read)."""
    parts = clean(path)
    _check_blocked(parts, blocked, path)
    with _root(root) as rfd:
        # a symlink at the name itself: write to what it points at, inside the workspace
        for _ in range(MAX_HOPS):
            dfd, name, resolved = _walk(rfd, parts, path, create=True)
            target = _link(dfd, name, path)
            if target is None:
                break
            os.close(dfd)
            parts = _resolve(resolved[:-1], target, path)
        else:
            raise OutsideWorkspace(f"{path}: too many symlinks")
        try:
            _check_blocked(resolved, blocked, path)
            mode = 0o644
            try:
                old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if st.S_ISDIR(old.st_mode):
                    raise Confined(f"{path} is a directory")
                mode = st.S_IMODE(old.st_mode)
            except FileNotFoundError:
                pass
            tmp = f".{name[:200]}.mnemon-{secrets.token_hex(6)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         mode, dir_fd=dfd)
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                if fsync:
                    os.fsync(fd)
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                os.unlink(tmp, dir_fd=dfd)
                raise
            os.close(fd)
            try:
                os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                os.unlink(tmp, dir_fd=dfd)
                raise
            if fsync:
                os.fsync(dfd)
        finally:
            os.close(dfd)
    return "/".join(resolved)


def remove(root: Path, path: str) -> None:
    """Delete a file in the workspace (not a directory; a symlink itself, not its target)."""
    parts = clean(path)
    with _root(root) as rfd:
        dfd, name, _ = _walk(rfd, parts, path)
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            raise Confined(f"{path}: no such file") from None
        except IsADirectoryError:
            raise Confined(f"{path} is a directory") from None
        finally:
            os.close(dfd)
