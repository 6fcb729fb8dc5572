"""``session.native`` against the ``blake3`` binding: every length 0-5000 and the chunk and tree
edges past it, records at random offsets in one buffer, mixed batches, every buffer type and
every SIMD kernel of the extension, and the pure-Python fallbacks to the same results."""

from __future__ import annotations

import mmap
import os
import random
from array import array

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mnemon.session.native as N

try:
    from mnemon.session import _b3many as B
except ImportError:  # the extension is optional; its tests are then skipped
    B = None

needs_ext = pytest.mark.skipif(B is None, reason="mnemon.session._b3many is not built")

EDGES = [1023, 1024, 1025, 2047, 2048, 2049, 3071, 3072, 3073, 4095, 4096, 4097, 8191, 8192,
         8193, 15359, 15360, 15361, 16383, 16384, 16385, 17407, 17408, 17409, 65536, 100_000,
         1_000_000]
LENGTHS = list(range(5001)) + EDGES


def oracle(data) -> str:
    return blake3.blake3(bytes(data)).digest(length=8).hex()


@pytest.fixture(scope="module")
def shared():
    """One random buffer with each length placed at a random offset inside it."""
    rnd = random.Random(1234)
    buf = rnd.randbytes(1_200_000)
    offs = [rnd.randrange(len(buf) - n + 1) for n in LENGTHS]
    want = [oracle(buf[o:o + n]) for o, n in zip(offs, LENGTHS)]
    return buf, offs, LENGTHS, want


KERNELS = B._kernels() if B is not None else []


@pytest.fixture(params=KERNELS or ["none"])
def kernel(request):
    if B is None:
        pytest.skip("mnemon.session._b3many is not built")
    before = B._set_kernel(request.param)
    yield request.param
    B._set_kernel(before)


def impls():
    out = [("python", N.py_digest_many, N.py_verify_many, N.py_split_lines)]
    if B is not None:
        out.append(("native", B.digest_many, B.verify_many, B.split_lines))
    return out


IMPLS = impls()
IDS = [i[0] for i in IMPLS]


def test_every_length_every_kernel(kernel, shared):
    buf, offs, lens, want = shared
    assert B.digest_many(buf, array("q", offs), array("q", lens)) == want
    # shuffled order: a batch mixes chunk counts and block counts differently
    order = list(range(len(lens)))
    random.Random(kernel).shuffle(order)
    got = B.digest_many(buf, [offs[i] for i in order], [lens[i] for i in order])
    assert got == [want[i] for i in order]
    assert B.verify_many(buf, array("q", offs), array("q", lens), want) == -1


def test_records_ending_at_the_end_of_the_buffer(kernel):
    """The last partial block is read with a fixed 64-byte copy except near the buffer's end."""
    data = random.Random(2).randbytes(3000)
    for size in (0, 1, 63, 64, 65, 100, 1023, 1024, 1025, 2100, 3000):
        buf = data[:size]
        lens = list(range(size + 1))
        offs = [size - n for n in lens]  # every suffix, each ending at the buffer's end
        assert B.digest_many(buf, offs, lens) == [oracle(buf[o:]) for o in offs]


def test_python_fallback_every_length(shared):
    buf, offs, lens, want = shared
    sel = list(range(0, 5001, 7)) + list(range(5001, len(lens)))
    assert N.py_digest_many(buf, [offs[i] for i in sel], [lens[i] for i in sel]) == \
        [want[i] for i in sel]


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 5000), st.sampled_from(EDGES[:-2])), max_size=300),
       seed=st.integers(0, 2**32 - 1))
def test_mixed_batches(sizes, seed):
    rnd = random.Random(seed)
    buf = rnd.randbytes(max(sizes, default=0) + 4096)
    offs = [rnd.randrange(len(buf) - n + 1) for n in sizes]
    want = [oracle(buf[o:o + n]) for o, n in zip(offs, sizes)]
    for _, digest, verify, _ in IMPLS:
        assert digest(buf, array("q", offs), array("q", sizes)) == want
        assert verify(buf, offs, sizes, want) == -1


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_empty_batch(name, digest, verify, split):
    assert digest(b"abc", array("q"), array("q")) == []
    assert digest(b"", [], []) == []
    assert verify(b"abc", [], [], []) == -1


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_buffer_types(name, digest, verify, split, tmp_path):
    data = random.Random(5).randbytes(10_000)
    offs, lens = [0, 17, 5000, 10_000], [3000, 1025, 5000, 0]
    want = [oracle(data[o:o + n]) for o, n in zip(offs, lens)]
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for buf in (data, bytearray(data), memoryview(data), mm):
            assert digest(buf, array("q", offs), array("q", lens)) == want
            assert digest(buf, offs, tuple(lens)) == want
            assert verify(buf, offs, lens, want) == -1
    # a memoryview slice: offsets are relative to the view
    view = memoryview(data)[100:9000]
    assert digest(view, [0, 10], [8900, 5]) == [oracle(data[100:9000]), oracle(data[110:115])]


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
@pytest.mark.parametrize("offs,lens,index", [
    ([0, 5], [5, 6], 1), ([0, -1], [1, 1], 1), ([0], [-1], 0), ([11], [0], 0),
    ([0, 0, 2**62], [1, 1, 2**62], 2), ([3], [2**63 - 1], 0),
])
def test_out_of_range(name, digest, verify, split, offs, lens, index):
    with pytest.raises(ValueError, match=f"record {index}"):
        digest(b"0123456789", offs, lens)
    with pytest.raises(ValueError, match=f"record {index}"):
        verify(b"0123456789", offs, lens, ["0" * 16] * len(offs))


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_mismatched_arguments(name, digest, verify, split):
    with pytest.raises(ValueError):
        digest(b"0123456789", [0, 1], [1])
    with pytest.raises(ValueError):
        verify(b"0123456789", [0], [1], [])
    with pytest.raises(TypeError):
        digest(b"0123456789", [0], ["x"])


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_end_of_buffer_is_a_valid_empty_record(name, digest, verify, split):
    assert digest(b"0123456789", [10], [0]) == [oracle(b"")]


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_verify_finds_the_first_tampered_record(name, digest, verify, split):
    rnd = random.Random(9)
    lens = [rnd.randrange(0, 6000) for _ in range(700)] + [40_000]
    offs, pos = [], 0
    for n in lens:
        offs.append(pos)
        pos += n + 1
    buf = bytearray(rnd.randbytes(pos))
    want = digest(buf, offs, lens)
    assert verify(buf, offs, lens, want) == -1
    for i in (0, 299, 300, 511, 512, 699, 700):
        if lens[i] == 0:
            continue
        j = offs[i] + rnd.randrange(lens[i])
        buf[j] ^= 1
        assert verify(buf, offs, lens, want) == i
        later = min(i + 5, len(lens) - 1)
        k = offs[later] + lens[later] // 2
        if lens[later]:
            buf[k] ^= 0x80  # a later mismatch does not hide the first
            assert verify(buf, offs, lens, want) == i
            buf[k] ^= 0x80
        buf[j] ^= 1
    assert verify(buf, offs, lens, want) == -1


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_verify_malformed_expected_is_a_mismatch(name, digest, verify, split):
    buf = b"hello\nworld\nagain\n"
    offs, lens = [0, 6, 12], [5, 5, 5]
    want = digest(buf, offs, lens)
    for bad in (want[1].upper(), want[1][:15], want[1] + "0", "zz" + want[1][2:], None,
                want[1].encode()):
        if bad == want[1]:
            continue
        assert verify(buf, offs, lens, [want[0], bad, want[2]]) == 1
        assert verify(buf, offs, lens, [want[0], want[1], bad]) == 2
    wrong = want[2][:-1] + ("0" if want[2][-1] != "0" else "1")
    assert verify(buf, offs, lens, [want[0], want[1], wrong]) == 2


@pytest.mark.parametrize("name,digest,verify,split", IMPLS, ids=IDS)
def test_split_lines(name, digest, verify, split):
    buf = b'{"a":1}\n\n{"b":2}\nxx\ntorn'
    offs, lens = split(buf)
    assert isinstance(offs, array) and offs.typecode == "q"
    assert isinstance(lens, array) and lens.typecode == "q"
    assert list(zip(offs, lens)) == [(0, 7), (8, 0), (9, 7), (17, 2)]
    assert list(zip(*split(buf, 8))) == [(8, 0), (9, 7), (17, 2)]
    assert list(zip(*split(buf, 9, 17))) == [(9, 7)]
    assert list(zip(*split(buf, 9, 16))) == []
    assert list(zip(*split(buf, 3, 20))) == [(3, 4), (8, 0), (9, 7), (17, 2)]
    assert split(b"") == (array("q"), array("q"))
    assert list(zip(*split(bytearray(b"\n\n")))) == [(0, 0), (1, 0)]
    assert list(zip(*split(memoryview(b"ab\ncd\n")[3:]))) == [(0, 2)]
    for start, end in ((-1, 5), (5, 4), (0, len(buf) + 1)):
        with pytest.raises(ValueError):
            split(buf, start, end)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: bytes(c % 3 for c in b).replace(b"\x02", b"\n")),
       cut=st.tuples(st.integers(0, 200), st.integers(0, 200)))
def test_split_lines_matches_a_plain_split(data, cut):
    start, end = sorted(min(c, len(data)) for c in cut)
    want, pos = [], start
    for piece in data[start:end].split(b"\n")[:-1]:
        want.append((pos, len(piece)))
        pos += len(piece) + 1
    for *_, split in IMPLS:
        assert list(zip(*split(data, start, end))) == want


@needs_ext
def test_split_then_digest_a_jsonl_buffer():
    rnd = random.Random(3)
    lines = [b'{"k":"' + rnd.randbytes(rnd.randrange(300, 5000)).hex().encode()[:rnd.randrange(
        300, 5000)] + b'"}' for _ in range(500)]
    buf = b"\n".join(lines) + b"\n" + b'{"torn'
    offs, lens = B.split_lines(buf)
    assert len(offs) == 500
    assert B.digest_many(buf, offs, lens) == [oracle(x) for x in lines]


@needs_ext
def test_gil_is_released_and_results_stay_right_across_threads():
    import threading
    rnd = random.Random(11)
    buf = rnd.randbytes(3_000_000)
    lens = [rnd.randrange(0, 5000) for _ in range(1000)]
    offs = [rnd.randrange(len(buf) - n) for n in lens]
    want = [oracle(buf[o:o + n]) for o, n in zip(offs, lens)]
    errors = []

    def run():
        for _ in range(5):
            if B.digest_many(buf, offs, lens) != want:
                errors.append("mismatch")

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_no_native_env_forces_the_fallback():
    import subprocess
    import sys
    code = ("import mnemon.session.native as N; print(N.AVAILABLE, "
            "N.digest_many is N.py_digest_many, N.split_lines is N.py_split_lines)")
    env = dict(os.environ, MNEMON_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "True"]
    if B is not None and os.environ.get("MNEMON_NO_NATIVE") != "1":
        assert N.AVAILABLE and N.digest_many is B.digest_many
