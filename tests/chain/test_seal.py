"""The writer's running chain (``session.log.Running``): the native ``Chain`` of
``session._b3many`` against the ``blake3`` package, byte for byte — the sealed lines, their
Locus digests, the keys and the heads — over generated records and lengths that cross BLAKE3's
chunk and tree edges; a log written with either reads back as one chain that ``verify`` accepts,
and a log begun by one is gone on with by the other."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.session import chain
from mnemon.session.log import RecordLog, Running, hasher

try:
    from mnemon.session._b3many import Chain
except ImportError:  # the extension is optional; its tests are then skipped
    Chain = None

needs_ext = pytest.mark.skipif(Chain is None, reason="mnemon.session._b3many is not built")

EDGES = [0, 1, 63, 64, 65, 1000, 1023, 1024, 1025, 2048, 4097, 16385, 65_530, 65_536,
         70_000, 300_000]


def record(body: bytes) -> bytes:
    return b'{"t":"Note","text":"' + body.hex().encode()[: len(body)] + b'"}'


def pair(prefix: bytes = b"", n: int = 0) -> tuple[Running, Running]:
    py = blake3.blake3()
    py.update(prefix)
    c = Chain()
    c.update(prefix)
    return Running(py, n), Running(c, n)


@needs_ext
def test_the_native_state_is_the_writer_default():
    assert type(hasher()) is Chain
    assert type(Running().h) is Chain


@needs_ext
@pytest.mark.parametrize("size", EDGES)
def test_seal_is_the_python_seal_at_the_edges(size):
    py, c = pair(os.urandom(size * 3 % 5000))
    for k in range(3):
        line = record(os.urandom(size + k))
        a, b = py.sealed(line), c.sealed(line)
        assert a == b
        data, own = b
        assert own == blake3.blake3(data[:-1]).digest(length=8).hex()
    assert py.head() == c.head()
    assert py.n == c.n == 3


@needs_ext
@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=30),
       st.integers(0, 3000))
def test_generated_records_seal_alike(bodies, prefix):
    py, c = pair(b"x" * prefix)
    whole = bytearray(b"x" * prefix)
    for body in bodies:
        line = record(body)
        a, b = py.sealed(line), c.sealed(line)
        assert a == b
        whole += b[0]
        # the key covers every byte before its digits
        digits = len(whole) - 1 - len(b'"]}') - 16
        assert b[0][-20:-4].decode() == blake3.blake3(bytes(whole[:digits])).digest(length=8).hex()
    assert c.head() == py.head() == blake3.blake3(bytes(whole)).hexdigest()


@needs_ext
def test_the_first_line_says_the_version():
    _, c = pair()
    data, _ = c.sealed(b'{"t":"SessionStarted"}')
    assert data.startswith(b'{"t":"SessionStarted","chain":1,"c":[1,"')
    data, _ = c.sealed(b'{"t":"Note"}')
    assert data.startswith(b'{"t":"Note","c":[2,"')


@needs_ext
@pytest.mark.parametrize("bad", [b"", b"}", b'{"t":1', b"[1]\n"])
def test_seal_refuses_what_is_not_a_record(bad):
    c = Chain()
    with pytest.raises(ValueError):
        c.seal(bad, 1)
    with pytest.raises(ValueError):
        c.seal(b"{}", 0)
    assert c.digest() == blake3.blake3().digest()  # nothing was hashed


@needs_ext
@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=6000), min_size=1, max_size=12))
def test_append_writes_what_seal_makes(tmp_path_factory, bodies):
    """``Chain.append`` (the writer's check, seal and write in one call, decision 0473) writes
    exactly ``seal``'s bytes and returns them with the same digest, record after record, the
    tail it is given longer or shorter than the line before."""
    path = tmp_path_factory.mktemp("a") / "log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        py, c = pair()
        size, tail, written = 0, b"", b""
        for body in bodies:
            line = record(body)
            want = py.sealed(line)
            got = c.h.append(fd, line, c.n + 1, size, tail)
            c.n += 1
            assert got == want
            size += len(got[0])
            written += got[0]
            tail = got[0][-4096:]
        assert path.read_bytes() == written
        assert c.head() == py.head() == blake3.blake3(written).hexdigest()
    finally:
        os.close(fd)


@needs_ext
def test_append_refuses_a_changed_file_writing_and_hashing_nothing(tmp_path):
    """The check before the write: a file not ``size`` bytes long, or not ending with ``tail``,
    or no longer linked, is answered None — nothing written, the state as it was."""
    path = tmp_path / "log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        c = Chain()
        data, _ = c.append(fd, b'{"t":"Note"}', 1, 0, b"")
        head = c.digest()
        for size, tail in ((len(data) + 1, data[-5:]), (len(data) - 1, b""),
                           (len(data), b"X" + data[-4:])):
            assert c.append(fd, b'{"t":"Note"}', 2, size, tail) is None
        assert path.read_bytes() == data and c.digest() == head
        os.unlink(path)  # still open, no name left
        assert c.append(fd, b'{"t":"Note"}', 2, len(data), data[-8:]) is None
        assert os.fstat(fd).st_size == len(data) and c.digest() == head
        with pytest.raises(ValueError):
            c.append(fd, b'{"t":"Note"}', 2, len(data), b"x" * 4097)  # a tail past TAIL
        with pytest.raises(ValueError):
            c.append(fd, b"[1]", 2, len(data), b"")  # not a record
    finally:
        os.close(fd)


@needs_ext
def test_digest_copy_and_buffers():
    c = Chain()
    c.update(memoryview(b"abc"))
    c.update(bytearray(b"def"))
    assert c.digest() == blake3.blake3(b"abcdef").digest()
    assert c.digest(length=8) == blake3.blake3(b"abcdef").digest(length=8)
    assert c.digest(length=100) == blake3.blake3(b"abcdef").digest(length=100)
    d = c.copy()
    d.update(b"g")
    assert c.digest() == blake3.blake3(b"abcdef").digest()
    assert d.digest() == blake3.blake3(b"abcdefg").digest()
    with pytest.raises(ValueError):
        c.digest(length=0)
    with pytest.raises(TypeError):
        c.update("text")
    with pytest.raises(TypeError):
        Chain(b"seed")


@needs_ext
def test_long_updates_run_beside_other_threads():
    """An update of 64 KiB or more releases the GIL; the result is still BLAKE3's."""
    big = os.urandom(8 << 20)
    c = Chain()
    t = threading.Thread(target=c.update, args=(big,))
    t.start()
    t.join()
    assert c.digest() == blake3.blake3(big).digest()


def _write(path: Path, lines: list[bytes]) -> None:
    log = RecordLog(path, new=True, chain=True, fsync="none")
    for line in lines:
        log.append_line(line)
    log.close()


LINES = [record(os.urandom(n)) for n in (10, 1500, 70_000, 3, 2048, 900)]


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_log_written_either_way_is_one_chain(tmp_path, native):
    """The same lines written by the native state (the default) and by the ``blake3`` package
    (``MNEMON_NO_NATIVE=1``, in a fresh process) are the same bytes, and the chain checks."""
    here = tmp_path / "here.jsonl"
    _write(here, LINES)
    there = tmp_path / "there.jsonl"
    src = tmp_path / "lines.bin"
    src.write_bytes(b"\n".join(LINES))
    env = {**os.environ, "MNEMON_NO_NATIVE": "0" if native == "1" else "1"}
    code = ("import sys; from pathlib import Path; from mnemon.session.log import RecordLog\n"
            "log = RecordLog(Path(sys.argv[1]), new=True, chain=True, fsync='none')\n"
            "for line in Path(sys.argv[2]).read_bytes().split(b'\\n'): log.append_line(line)\n"
            "log.close()\n")
    subprocess.run([sys.executable, "-c", code, str(there), str(src)], env=env, check=True)
    assert here.read_bytes() == there.read_bytes()
    report = chain.check(there, "there")
    assert report.chained and report.broken is None and report.lines == len(LINES)
    assert report.head == blake3.blake3(there.read_bytes()).hexdigest()


def test_a_reopened_log_goes_on_with_the_writers_state(tmp_path):
    """``resume_state`` hands the writer the kind of state it writes with, at the end of the
    file: the records appended after a reopen chain on, and the whole log checks."""
    p = tmp_path / "r.jsonl"
    _write(p, LINES[:3])
    state = chain.resume_state(p, "r")
    assert state is not None and type(state.h) is type(hasher()) and state.n == 3
    log = RecordLog(p, chain=False, fsync="none")
    log.go_on(state)
    for line in LINES[3:]:
        log.append_line(line)
    log.close()
    report = chain.check(p, "r")
    assert report.broken is None and report.lines == len(LINES)
