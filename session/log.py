"""The record log: the one writer of ``record.jsonl``, and the digest-checked reader.

``append`` writes one whole line and returns its Locus only once the line is written; a Locus
never exists for a partial line. ``scan`` yields ``(locus, record)`` one record at a time in
bounded memory. ``read_at`` checks a Locus digest against the bytes *before* parsing them.
A torn last line (a crash mid-append) is moved aside to a sibling file when the log is reopened
for appending; read-only users only report it.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import blake3
import msgspec

from . import native as _native
from .errors import DigestMismatch, LogBusy, LogChanged, LogClosed, LogCorrupt, LogWriteFailed
from .records import DECODE_ERRORS, Locus, Pointer, Record, decode, encode, encoder

FIRST = b',"chain":1,"c":[1,"'
"""What the writer splices into a chained log's first line: the chain's version, then the
first record's number (docs/format.md, "The chain"; ``session.chain`` reads it)."""


class Running:
    """The writer's side: the BLAKE3 state of every byte written so far and the record count.

    ``h`` is the native ``Chain`` (``session._b3many``) when it is built: ``seal`` is then one
    call that splices the key, advances the state and digests the line for its Locus — the
    chain's cost per record is its hashing, not a handful of Python calls and copies around
    it. Without the extension (or with ``MNEMON_NO_NATIVE=1``) the ``blake3`` package does the
    same bytes; the tests hold both to the same output."""

    __slots__ = ("h", "n")

    def __init__(self, h=None, n: int = 0):
        self.h = h if h is not None else hasher()
        self.n = n

    def seal(self, line: bytes) -> bytes:
        """``line`` (an encoded record, ``{…}``) with its chain key and its newline, the state
        advanced over it. The caller writes exactly these bytes or forgets this state."""
        return self.sealed(line)[0]

    def sealed(self, line: bytes) -> tuple[bytes, str]:
        """``(data, digest)``: ``seal``'s bytes and their own digest without the newline
        (the record's Locus digest), in the one call the writer makes per record."""
        n = self.n + 1
        h: Any = self.h  # the native Chain or a blake3 state; both hash the same bytes
        if type(h) is _Chain:
            out = h.seal(line, n)
        else:
            pre = line[:-1] + (FIRST if n == 1 else b',"c":[%d,"' % n)
            h.update(pre)
            post = h.digest(length=8).hex().encode() + b'"]}\n'
            h.update(post)
            data = pre + post
            out = data, digest(view_of(data, len(data) - 1))
        self.n = n
        return out

    def head(self) -> str:
        return self.h.digest().hex()


class _NoChain:  # the type nothing is when the extension is not built
    pass


_Chain: Any = _NoChain
if _native.AVAILABLE:
    _Chain = getattr(_native._native, "Chain", _NoChain)


def hasher():
    """A fresh running BLAKE3 state for a chain: the native ``Chain`` when built, else the
    ``blake3`` package's (the same digests; ``update``, ``digest(length=)``, ``copy``)."""
    return _Chain() if _Chain is not _NoChain else blake3.blake3()


Fsync = Literal["none", "turn", "record"]
CHUNK = 1 << 20
TAIL = 4096
"""Bytes at the end of the log the writer keeps and compares before each append: the last
record it wrote (its last TAIL bytes when longer). One ``pread`` of at most a page."""


def digest(line: bytes | memoryview) -> str:
    """First 8 bytes of blake3 of exactly the line's bytes, as 16 hex digits."""
    return blake3.blake3(line).digest(length=8).hex()


class TornTail(msgspec.Struct, frozen=True):
    """Trailing bytes without a newline: the expected trace of a crash, not corruption."""

    offset: int
    length: int
    moved_to: str | None = None


def find_torn_tail(path: Path) -> TornTail | None:
    """Report bytes after the last newline, reading only the file's tail."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    with open(path, "rb") as f:
        pos = size
        while pos > 0:
            start = max(0, pos - 65536)
            f.seek(start)
            chunk = f.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                end = start + nl + 1
                return None if end == size else TornTail(end, size - end)
            pos = start
    return TornTail(0, size)


def iter_lines(path: Path, start: int = 0) -> Iterator[tuple[int, memoryview]]:
    """Yield ``(offset, line)`` for every complete line (without its newline), chunk by chunk.

    A torn tail is not yielded, nor read: a crash may leave a tail of any length. Memory stays
    bounded by the chunk plus the longest complete line, and a line longer than a chunk (a large
    ``Inherited`` link) is joined once, not re-copied with every chunk that extends it.
    """
    torn = find_torn_tail(path)
    stop = torn.offset if torn is not None else None  # a torn tail, however long, is not read
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        base = start  # file offset of the first byte not yet yielded
        parts: list[bytes] = []  # the unfinished line, piece by piece
        read = start  # file offset of the next byte to read
        while True:
            want = CHUNK if stop is None else min(CHUNK, stop - read)
            chunk = f.read(want) if want > 0 else b""
            if not chunk:
                return
            read += len(chunk)
            pos = 0
            if parts:
                nl = chunk.find(b"\n")
                if nl < 0:
                    parts.append(chunk)
                    continue
                parts.append(chunk[:nl])
                line = b"".join(parts)
                parts = []
                yield base, memoryview(line)
                base += len(line) + 1
                pos = nl + 1
            mv = memoryview(chunk)
            find = chunk.find
            while True:
                nl = find(b"\n", pos)
                if nl < 0:
                    break
                yield base, mv[pos:nl]
                base += nl - pos + 1
                pos = nl + 1
            if pos < len(chunk):
                parts.append(chunk[pos:])


def scan(path: Path) -> Iterator[tuple[Locus, Record]]:
    """``(locus, record)`` for every complete line, decoded one at a time."""
    for off, line in iter_lines(path):
        yield (off, len(line), digest(line)), decode(line)


def read_span(path: Path, display: str, loci: list[Locus], *, check: bool = True) -> Iterator[bytes]:
    """The bytes of each Locus, digest-checked before anyone parses them.

    Loci are read in the order given; callers sort them when they want one sequential pass.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for off, length, want in loci:
            if off + length > size:  # checked before reading: a claimed length is not trusted
                raise LogCorrupt(display, off, f"the file ends before this record ({length} bytes)")
            f.seek(off)
            raw = f.read(length)
            if len(raw) != length:
                raise LogCorrupt(display, off, f"the file ends before this record ({length} bytes)")
            if check:
                got = digest(raw)
                if got != want:
                    raise DigestMismatch(display, off, want, got)
            yield raw


def read_at(path: Path, pointer: Pointer) -> list[Record]:
    """The records a Pointer names in the file at ``path`` (already confined by the caller),
    each digest-checked before it is parsed; a mismatch is refused naming path and offset."""
    out: list[Record] = []
    for raw, locus in zip(read_span(path, pointer.source, pointer.loci), pointer.loci):
        try:
            out.append(decode(raw))
        except DECODE_ERRORS as e:
            raise LogCorrupt(pointer.source, locus[0], f"not a record ({e})") from None
    return out


def view_of(data: bytes, n: int) -> memoryview:
    return memoryview(data)[:n]


def _rehash(fd: int | None, size: int) -> "Running":
    """The running chain rebuilt from the file's first ``size`` bytes (after a failed append
    advanced it over bytes that were cut back)."""
    h = hasher()
    n = 0
    pos = 0
    while pos < size:
        data = os.pread(fd, min(CHUNK, size - pos), pos)  # type: ignore[arg-type]
        if not data:
            break
        h.update(data)
        n += data.count(b"\n")
        pos += len(data)
    return Running(h, n)


_TMPFILE = getattr(os, "O_TMPFILE", 0)


def _make_folder(path: str) -> None:
    """The log's directory (an agent's, in agents/: one level; deeper only when missing)."""
    folder = os.path.dirname(path)
    try:
        os.mkdir(folder)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:
        pass


def _created(path: Path, flags: int) -> int | None:
    """A new log's file, made here (``O_EXCL``): its directory first — a new agent's never
    exists, so this is one ``mkdir`` and one ``open`` where opening first paid a failed open
    and its exception too (~20 µs of the ~40 an agent's log cost to open on tmpfs). None when
    the file exists already (made ahead, or empty): the caller opens it and checks it is empty."""
    name = os.fspath(path)  # a string once: a Path converts again for every call
    _make_folder(name)
    try:
        return os.open(name, flags | os.O_EXCL, 0o644)
    except FileExistsError:
        return None


def unborn(path: Path) -> int | None:
    """A log made ahead of its agent, off the event loop: ``path``'s directory, and in it an
    unnamed file (``O_TMPFILE``) open for appending and locked, which ``RecordLog(path,
    new=True, unborn=fd)`` names with one link at the agent's birth.

    Why: on ext4 without a journal (this VM's root file system) creating a file costs 0.05–0.5
    ms of kernel time for a minute after many files were removed nearby (decision 0263); a link
    is ~7 µs. Paid on the Trio thread, every agent that starts paid it. An unnamed file has no
    name to leave behind: a process killed before the birth leaves only the empty directory,
    which is no agent. None where the system has no unnamed files (not Linux, NFS, too many
    open files): the log is then created at birth, as without this.

    Plain ``os`` calls on strings: this runs in a thread beside the Trio loop, and each stretch
    of Python between two calls holds the GIL the loop waits for."""
    folder = os.path.dirname(path)
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the run root's agents/ folder first
        os.makedirs(folder, exist_ok=True)
    if not _TMPFILE:
        return None
    try:
        fd = os.open(folder, _TMPFILE | os.O_RDWR | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _name(fd: int, path: Path) -> bool:
    """Give an unborn file its name; False when ``path`` exists already (or the link fails),
    the file then closed and forgotten. The source is the descriptor's ``/proc`` link, followed
    (``linkat`` with ``AT_SYMLINK_FOLLOW``: ``os.link`` takes that call only with a directory
    descriptor, which an absolute source ignores)."""
    global _TMPFILE
    try:
        os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
        return True
    except FileExistsError:  # another writer created it first
        os.close(fd)
        return False
    except OSError:  # no /proc, say: created below, and no more unborn files made
        os.close(fd)
        _TMPFILE = 0
        return False


_encode = encoder.encode  # ``records.encode`` without its call: every append makes one


class RecordLog:
    """The single writer of one agent's ``record.jsonl``.

    The caller holds the agent's lock (the seam); writes are whole lines through one
    ``os.write`` on an ``O_APPEND`` descriptor, so a crash leaves at most one torn line.
    An exclusive advisory lock on the file is taken before anything else — a second writer, in
    this process or another, is refused by name before it can touch a torn tail.

    The lock binds only writers that take it: log rotation with ``copytruncate``, a careless
    ``> record.jsonl`` or an editor can still change the file under us. So before each append
    the writer checks that the file is still the one it wrote (``_check``: its size against our
    own offset, and its last bytes against the record we wrote last) and refuses by name when
    it is not (``LogChanged``): a line appended past damage it has not seen would make a log
    that folds, verifies and is wrong. One ``fstat`` and one small ``pread`` per append.
    """

    def __init__(self, path: Path, *, fsync: Fsync = "none", new: bool = False,
                 unborn: int | None = None, chain: bool = False):
        """``new``: the log must be empty or absent (``FileExistsError`` otherwise), as for an
        agent being created — checked on the open descriptor, not by a ``stat`` before it.
        ``unborn`` (with ``new``): a file made ahead by ``unborn()``, named here, or closed and
        the log opened as without it when ``path`` exists already.

        ``chain``: a log that holds no record yet is written chained (``session.chain``;
        every agent's log is). A log that holds records is appended to unchained until
        ``go_on`` is given its chain (``AgentLog.resume`` does, refusing a broken one)."""
        self.path = path
        self.fsync = fsync
        self.torn: TornTail | None = None
        self._chain: Running | None = Running() if chain else None
        self._rechain = False  # a failed append left the running state ahead of the file
        self.broken: str | None = None  # why no more appends are taken, after a failed fsync
        # a new log's name is durable only once its directory (and the agent's, in agents/)
        # is: synced with the file's first durability point, where there is one
        self._dirs: tuple[Path, ...] = (path.parent, path.parent.parent) \
            if new and fsync != "none" else ()
        self._tail = b""  # the last bytes of the file as we left it (at most TAIL)
        if unborn is not None and new and _name(unborn, path):
            self._size = 0
            self._fd: int | None = unborn
            return
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT  # read too: ``_check`` reads the tail
        fd = _created(path, flags) if new else None
        if fd is None:
            try:
                fd = os.open(path, flags, 0o644)
            except FileNotFoundError:  # its directory first (one syscall saved when it exists)
                _make_folder(os.fspath(path))
                fd = os.open(path, flags, 0o644)
            if new and os.fstat(fd).st_size > 0:
                os.close(fd)
                raise FileExistsError(f"{path} already holds a log")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogBusy(f"{path} is open for writing elsewhere (one writer per log)") \
                    from None
            raise
        try:
            size = os.fstat(fd).st_size
            if new and size > 0:  # again under the lock: a writer that created the file
                # first may have written and closed it between our open and our lock
                raise FileExistsError(f"{path} already holds a log")
            torn = find_torn_tail(path) if size else None  # a new file has no tail to tear
            if torn is not None:
                self.torn = self._move_aside(torn)
                size = os.fstat(fd).st_size
            self._size = size
            if size:
                self._tail = os.pread(fd, min(size, TAIL), size - min(size, TAIL))
                self._chain = None  # a log with records: ``go_on`` says (session.chain)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _move_aside(self, torn: TornTail) -> TornTail:
        """Copy the torn bytes to a sibling file, then cut them off the log."""
        n = 0
        while True:
            aside = self.path.with_name(f"{self.path.name}.torn-{torn.offset}" + (f".{n}" if n else ""))
            if not aside.exists():
                break
            n += 1
        with open(self.path, "rb") as f, open(aside, "wb") as g:
            f.seek(torn.offset)
            while block := f.read(CHUNK):  # a tail of any length, in bounded memory
                g.write(block)
            g.flush()
            os.fsync(g.fileno())
        os.truncate(self.path, torn.offset)
        return TornTail(torn.offset, torn.length, aside.name)

    @property
    def size(self) -> int:
        return self._size

    @property
    def chained(self) -> bool:
        return self._chain is not None

    def go_on(self, chain: "Running | None") -> None:
        """Go on with the chain of a reopened log (``session.chain.resume_state``: its state
        after the last record, or None for an unchained log). Before the first append."""
        self._chain = chain

    def head(self) -> tuple[int, int, str] | None:
        """``(bytes, records, head)`` of what this writer has written, when the log is chained:
        the head is BLAKE3 of the whole file (docs/format.md, "The chain")."""
        chain = self._chain
        if chain is None or self._fd is None:
            return None
        if self._rechain:
            chain = self._chain = _rehash(self._fd, self._size)
            self._rechain = False
        return self._size, chain.n, chain.head()

    def append(self, record: Record) -> Locus:
        return self.append_line(_encode(record))

    def append_line(self, line: bytes) -> Locus:
        """Write one encoded record as a whole line; return its Locus once it is written."""
        if self._fd is None:
            raise LogClosed(f"{self.path} is closed")
        if self.broken is not None:
            raise LogWriteFailed(f"{self.path}: no more appends after {self.broken}")
        chain = self._chain
        written = False  # by the native call: checked, sealed and written in one
        if chain is not None and line[-1:] == b"}":
            if self._rechain:
                chain = self._chain = _rehash(self._fd, self._size)
                self._rechain = False
            h = chain.h
            if type(h) is _Chain:  # check, seal and write in one native call (decision 0473)
                n = chain.n + 1
                try:
                    out = h.append(self._fd, line, n, self._size, self._tail)
                except OSError as e:  # the state went on over the line: rehash it from the file
                    raise self._write_failed(e, rechain=True) from None
                if out is not None:
                    chain.n = n
                    data, own = out
                    written = True
                # else refused, nothing hashed or written: the check below names what changed
                # (and, should the file have come back as it was meanwhile, the append goes on)
            if not written:
                self._check()
                data, own = chain.sealed(line)
        else:
            self._check()
            data, own = line + b"\n", digest(line)
        if not written:
            view = memoryview(data)
            try:
                while view:
                    k = os.write(self._fd, view)
                    view = view[k:]
            except OSError as e:  # a full disk or an I/O error: cut the partial line off again
                raise self._write_failed(e, rechain=chain is not None) from None
        # the durability point of ``record``, the size and tail the next append checks
        if self.fsync == "record":
            self._fsync()
        size = self._size
        ln = len(data)
        self._size = size + ln
        self._tail = data if ln <= TAIL else data[-TAIL:]
        return (size, ln - 1, own)

    def _write_failed(self, e: OSError, *, rechain: bool) -> LogWriteFailed:
        """After a write failed part-way: the partial line cut off again, the chain (advanced
        over it) to be rehashed from the file before the next append; the error to raise."""
        self._rechain = rechain
        self._cut_back(e)
        return LogWriteFailed(f"{self.path}: append failed ({os.strerror(e.errno or 0) or e}); "
                              "the log keeps only whole records")

    def _check(self) -> None:
        """Refuse to append unless the file is still what this writer left: as long as our own
        offset (not cut back by a rotation or a ``> file``, not grown by another writer), still
        linked (not deleted or replaced by a rename), and ending with the bytes we wrote last.
        Once refused, the log takes no more appends: what is on disk is no longer ours."""
        fd = self._fd
        st = os.fstat(fd)  # type: ignore[arg-type]
        size = self._size
        if st.st_size == size and st.st_nlink:
            tail = self._tail
            if not tail or os.pread(fd, len(tail), size - len(tail)) == tail:  # type: ignore[arg-type]
                return
            what = (f"its last record (the {len(tail)} bytes before offset {size}) is not the "
                    "one this writer wrote")
        elif not st.st_nlink:
            what = "it was deleted or replaced (the file this writer holds has no name left)"
        elif st.st_size < size:
            what = (f"it shrank from {size} to {st.st_size} bytes (truncated under its writer: "
                    "log rotation with copytruncate, a '> file'?)")
        else:
            what = (f"it grew from {size} to {st.st_size} bytes that this writer did not "
                    "write (another writer?)")
        self.broken = f"the file changed under its writer: {what}"
        raise LogChanged(f"{self.path}: {self.broken}; nothing was appended — verify it and "
                         "resume the agent from what it holds")

    def _cut_back(self, cause: OSError) -> None:
        assert self._fd is not None  # an append failed: the file is open
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as e:
            self.broken = f"a failed append that could not be cut back ({e.strerror})"

    def _fsync(self, fd: int | None = None) -> None:
        try:
            os.fsync(self._fd if fd is None else fd)  # type: ignore[arg-type]  # open: syncing
            while self._dirs:
                d = os.open(self._dirs[0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(d)
                finally:
                    os.close(d)
                self._dirs = self._dirs[1:]
        except OSError as e:
            # After a failed fsync the kernel may have dropped the dirty pages: what is on disk
            # is unknown, so this writer stops; a reopen re-reads what the disk really holds.
            self.broken = f"a failed fsync ({os.strerror(e.errno or 0) or e})"
            raise LogWriteFailed(f"{self.path}: {self.broken}; reopen the log to continue") \
                from None

    def sync(self) -> None:
        """Flush to disk now, whatever the setting (a fork calls this on a child's opening)."""
        if self._fd is not None and self.fsync != "none" and self.broken is None:
            self._fsync()

    def turn_boundary(self) -> None:
        """The ``turn`` setting's durability point: fsync once per turn boundary."""
        if self._fd is not None and self.fsync == "turn" and self.broken is None:
            self._fsync()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if self.fsync != "none" and self.broken is None:
                    self._fsync(fd)
            finally:
                os.close(fd)  # also releases the lock

    def __enter__(self) -> "RecordLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
