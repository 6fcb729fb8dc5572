"""Fuzz the two C extensions (``session._scan``, ``session._b3many``) on hostile input, built
with AddressSanitizer + UndefinedBehaviorSanitizer. A script, not a test.

How to run it (from the repo root, venv active)::

    # 1. build sanitized copies of both extensions outside the tree (same sources as setup.py)
    python bench/fuzz_native.py build /tmp/san

    # 2. the environment every sanitized run needs: libasan first in the process, pymalloc off
    #    (so PyMem_Malloc'd and bytes buffers get ASan redzones), leak checking off (CPython
    #    keeps its arenas alive at exit), stop on the first UB report
    export SAN="LD_PRELOAD=$(gcc -print-file-name=libasan.so) PYTHONMALLOC=malloc \\
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \\
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"

    # 3. the existing native tests against the sanitized builds
    env $SAN python bench/fuzz_native.py pytest /tmp/san -- -q -p no:cacheprovider tests/native

    # 4. fuzz: a seeded random mutator (any target, for N seconds) ...
    env $SAN python bench/fuzz_native.py fuzz /tmp/san --target all --seconds 600 --seed 1
    #    ... or atheris (pip install atheris; libFuzzer drives the bytes, the harness gives them
    #    structure), one target per process
    env $SAN python bench/fuzz_native.py atheris /tmp/san --target scan -- -max_total_time=600

Targets: ``scan`` (count_literal on real trajectory lines from tests/data/trajectories (or MNEMON_BENCH_CORPUS)
re-encoded as records, then mutated: bit flips, truncation, inserted quotes/backslashes/``\\u``
escapes/brackets, deep nesting, huge numbers, invalid UTF-8, NUL bytes; checked against the
decoding oracle whenever msgspec still reads the line), ``findall`` (find_all against
bytes.find), ``b3`` (digest_many / verify_many under every kernel against the blake3 package,
split_lines, framed), ``fill`` (fill over pipes and files with random carries against py_fill).

Every record is handed to the extension in a buffer that ends exactly where the record ends: a
malloc'd block of exactly that size (ASan redzones on both sides), a memoryview slice of a larger
buffer, and a page whose next page is PROT_NONE (an overread faults even without ASan). Any
sanitizer report aborts the process with its stack; a wrong answer raises AssertionError with
the input. ``--save DIR`` writes each failing input there.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.machinery
import importlib.util
import json
import mmap
import os
import random
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _data import TRAJECTORIES  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)

SANFLAGS = ["-shared", "-fPIC", "-O1", "-g", "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-std=c11",
            "-fvisibility=hidden"]
B3 = "third_party/blake3/"
B3_SOURCES = ["native/b3many.c", B3 + "blake3.c", B3 + "blake3_dispatch.c", B3 + "blake3_portable.c",
              *[f"native/blake3_{k}_target.c" for k in ("sse2", "sse41", "avx2", "avx512")]]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


# --------------------------------------------------------------------------- build and load


def build(out: str) -> None:
    """Compile both extensions with ASan+UBSan into ``out`` (as setup.py does, x86-64)."""
    os.makedirs(out, exist_ok=True)
    inc = ["-I" + sysconfig.get_paths()["include"]]
    for name, srcs, extra in (("_scan", ["native/scan.c"], []),
                              ("_b3many", B3_SOURCES, ["-I" + B3])):
        cmd = ["gcc", *SANFLAGS, *inc, *extra, *[os.path.join(ROOT, s) for s in srcs],
               "-o", os.path.join(out, name + SUFFIX)]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)


def load(san: str):
    """Import the sanitized builds in ``san`` as ``session._scan`` / ``session._b3many`` (before
    ``session.native`` imports them), and return (scan, b3, native)."""
    mods = []
    for name in ("_scan", "_b3many"):  # before ``import session``, which imports session.native
        path = os.path.join(san, name + SUFFIX)
        full = "mnemon.session." + name
        loader = importlib.machinery.ExtensionFileLoader(full, path)
        spec = importlib.util.spec_from_file_location(full, path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules[full] = mod
        mods.append(mod)
    from mnemon import session
    session._scan, session._b3many = mods
    from mnemon.session import native
    assert native.count_literal is mods[0].count_literal and native.digest_many is mods[1].digest_many
    return mods[0], mods[1], native


# --------------------------------------------------------------------------- exact buffers

_libc = ctypes.CDLL(None, use_errno=True)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = mmap.PAGESIZE


class Exact:
    """``n`` bytes malloc'd exactly (under ASan: redzones right before and after)."""

    def __init__(self, data: bytes):
        self.n = len(data)
        self.ptr = _libc.malloc(max(self.n, 1))
        ctypes.memmove(self.ptr, data, self.n)
        self.view = memoryview((ctypes.c_char * self.n).from_address(self.ptr)).cast("B")

    def close(self):
        self.view.release()
        _libc.free(self.ptr)


class Guarded:
    """Bytes placed to end at a page end, the next page PROT_NONE: reading one byte past the
    end faults with or without ASan. ``view`` covers exactly the data."""

    def __init__(self, data: bytes):
        pages = (len(data) + PAGE - 1) // PAGE + 1
        self.m = mmap.mmap(-1, pages * PAGE)
        self.end = (pages - 1) * PAGE
        self.start = self.end - len(data)
        self.m[self.start:self.end] = data
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.m))
        if _libc.mprotect(addr + self.end, PAGE, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
        self._addr = addr
        self.view = memoryview(self.m)[self.start:self.end]

    def close(self):
        self.view.release()
        _libc.mprotect(self._addr + self.end, PAGE, mmap.PROT_READ | mmap.PROT_WRITE)
        self.m.close()


def wrappers(data: bytes):
    """(label, buffer, offset of data in buffer, cleanup) for each way of ending a buffer."""
    e = Exact(data)
    yield "exact", e.view, 0, e.close
    g = Guarded(data)
    yield "guarded", g.view, 0, g.close
    big = b"\x00" * 3 + data + b'"\\u}]\n'
    mv = memoryview(big)[3:3 + len(data)]
    yield "slice", mv, 0, mv.release
    yield "bytes", data, 0, lambda: None


# --------------------------------------------------------------------------- corpus

DEV = str(TRAJECTORIES / "*.jsonl")


def corpus_records() -> list[bytes]:
    """Real trajectory lines re-encoded as records (one of each shape the scanner searches)."""
    from mnemon.session.records import (AssistantMessage, Evicted, Marked, Residue, Steering, Text,
                                 Thinking, ToolResult, ToolResults, ToolUse, UserPrompt, encode)
    out: list[bytes] = []
    for path in sorted(glob.glob(DEV)):
        with open(path, "rb") as f:
            for i, raw in enumerate(f):
                d = json.loads(raw)
                text = d.get("text") or ""
                role = d.get("role")
                if role == "assistant":
                    blocks = [Text(text)] if i % 3 else [Thinking(text, None), Text(text[:50])]
                    for c in d.get("tool_calls") or []:
                        blocks.append(ToolUse(c.get("id", "x"), c.get("name", "bash"),
                                              c.get("arguments")))
                    rec = AssistantMessage(turn=i, blocks=blocks, stop_reason=None, model=None,
                                           usage=None)
                elif role == "tool":
                    rec = ToolResults(results=[ToolResult(tool_use_id=d.get("tool_call_id", "x"),
                                                          content=text, is_error=bool(i % 2))])
                elif role == "user":
                    rec = UserPrompt(turn=i, text=text)
                elif i % 3 == 0:
                    rec = Evicted(residue=Residue((i, i + 1), text[:200]))
                elif i % 3 == 1:
                    rec = Marked(block=(i, 0), replacement=text)
                else:
                    rec = Steering(text=text, by="user")
                out.append(encode(rec))
    if not out:  # no data here: a few synthetic ones
        out = [encode(UserPrompt(turn=1, text="the x\nthe y \u00e9 \"q\" \\ /" * 20)),
               encode(ToolResults(results=[ToolResult(tool_use_id="a", content="ab\ncd" * 50)]))]
    return out


TOKENS = [b'"', b"\\", b"\\u", b"\\u00", b"\\ud83d", b"\\udc00", b"\\ud83d\\ude00", b"\\n",
          b"\\/", b"{", b"}", b"[", b"]", b":", b",", b" ", b"\t", b"\n", b"\x00", b"\x1f",
          b"\x7f", b"\x80", b"\xc3", b"\xe2\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff",
          b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"null", b"true", b"false",
          b"-0", b"1e999", b"-", b"0.", b"1" * 1200, b"9" * 40, b'"t":', b'"text":', b'"type":',
          b'"input":', b'"note":', b'"content":', b'"results":', b'"blocks":', b'"residue":',
          b'"UserPrompt"', b'"tool_use"', b'"text"', b'"thinking"', b'"opaque"', b'{"t":"Cleared"}',
          b'"t":"AssistantMessage","blocks":[{"type":"text","text":',
          b'"t":"ToolResults","results":[{"content":', b'"t":"Evicted","residue":{"note":']
LITS = [b"the", b"t", b"e", b"n", b"x", b"u", b"/", b"a/b", b"{", b"}", b"[", b":", b",", b"1,2",
        b"null", b"text", b"type", b"u0041", b"A", b"  ", b"def ", b"return", b"import", b"self",
        b"==", b"<output>", b"git", b"py", b"0", b"x" * 20, b"y the"]


def mutate(rng: random.Random, line: bytes) -> bytes:
    b = bytearray(line)
    for _ in range(rng.choice((1, 1, 2, 3, 5, 10))):
        op = rng.randrange(11)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:  # bit flip
            i = min(i, len(b) - 1)
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # truncation
            del b[i:]
        elif op == 2:
            b[i:i] = rng.choice(TOKENS)
        elif op == 3 and b:  # delete a run
            del b[i:i + rng.randrange(1, 20)]
        elif op == 4 and b:  # replace a byte
            i = min(i, len(b) - 1)
            b[i] = rng.choice(b' "\\{}[],:ntu0Ax\x00\x80\xff\x01\n')
        elif op == 5:  # deep nesting
            d = rng.choice((3, 100, 511, 512, 513, 600, 5000))
            o, c = rng.choice(((b"[", b"]"), (b'{"a":', b"}"), (b'[{"k":', b"}]")))
            b[i:i] = o * d + rng.choice((b"1", b'""', b"{}", b"")) + c * rng.choice((d, d - 1, 0))
        elif op == 6:  # huge number
            b[i:i] = rng.choice((b"-", b"")) + b"1" * rng.choice((20, 999, 1000, 1001, 5000)) \
                + rng.choice((b"", b".5", b"e9", b"E-1"))
        elif op == 7 and b:  # duplicate a slice
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 200)]
        elif op == 8:  # escapes at a window boundary
            b[i:i] = b"x" * rng.randrange(70) + rng.choice((b"\\", b"\\\\", b"\\n", b"\\u0041"))
        elif op == 9 and b:  # cut exactly after a token
            k = b.find(rng.choice((b":", b'"', b",", b"[", b"{", b"\\")), i)
            if k >= 0:
                del b[k + 1:]
        else:  # random bytes
            b[i:i] = rng.randbytes(rng.randrange(1, 16))
    return bytes(b)


# --------------------------------------------------------------------------- checks


class Checker:
    def __init__(self, scan, b3, native, save: str | None):
        import blake3
        import msgspec
        import regex
        from mnemon.session.door import _Matcher, _texts
        from mnemon.session.records import decode
        self.scan, self.b3, self.native = scan, b3, native
        self.blake3, self.msgspec, self.regex = blake3, msgspec, regex
        self._Matcher, self._texts, self.decode = _Matcher, _texts, decode
        self.save = save
        self.kernels = b3._kernels()
        self.counts: dict[str, int] = {}

    def _saved(self, kind: str, data) -> None:
        if self.save:
            os.makedirs(self.save, exist_ok=True)
            name = os.path.join(self.save, f"{kind}-{time.time_ns()}.json")
            with open(name, "w") as f:
                json.dump(data, f)

    def tick(self, k):
        self.counts[k] = self.counts.get(k, 0) + 1

    # -- count_literal
    def oracle(self, line: bytes, lit: bytes) -> int | None:
        try:
            rec = self.decode(line)
        except (self.msgspec.DecodeError, self.msgspec.ValidationError, RecursionError):
            return None  # msgspec refuses it (RecursionError: nested deeper than it reads)
        m = self._Matcher(self.regex.escape(lit.decode()), 5.0, True)
        return sum(m.count(t) for t in self._texts(rec))

    def scan_one(self, line: bytes, lit: bytes) -> None:
        self.tick("scan")
        if self.save:  # the input under test, for a crash (a sanitizer report ends the process)
            os.makedirs(self.save, exist_ok=True)
            with open(os.path.join(self.save, "current-scan.json"), "w") as f:
                json.dump({"line": line.decode("latin-1"), "lit": lit.decode()}, f)
        want = self.oracle(line, lit)
        answers = []
        for label, buf, at, close in wrappers(line):
            try:
                answers.append((label, self.scan.count_literal(buf, [at], [len(line)], lit)[0]))
            finally:
                close()
        # several records in one buffer, the hostile one last and ending the buffer
        good = b'{"t":"UserPrompt","turn":1,"text":"the x"}'
        e = Exact(good + b"\n" + line)
        try:
            r = self.scan.count_literal(e.view, [0, len(good) + 1], [len(good), len(line)], lit)
            answers.append(("multi", r[1]))
        finally:
            e.close()
        vals = {a for _, a in answers}
        if want is not None:
            self.tick("scan_decodes")
            if vals != {-1}:
                self.tick("scan_decodes_certain")
        ok = len(vals) == 1 and (want is None or vals <= {-1, want})
        if not ok:
            self._saved("scan", {"line": line.decode("latin-1"), "lit": lit.decode(),
                                 "answers": answers, "want": want})
            raise AssertionError(f"count_literal {answers} != {want} for {lit!r} on {line!r}")

    # -- find_all
    def find_all_one(self, rng: random.Random) -> None:
        self.tick("findall")
        alpha = rng.choice((b"ab", b"abc\n", bytes(range(256)), b"xy\x00"))
        data = bytes(rng.choice(alpha) for _ in range(rng.randrange(0, 400)))
        needles = []
        for _ in range(rng.randrange(1, 5)):
            if data and rng.random() < 0.6:
                i = rng.randrange(len(data))
                nd = data[i:i + rng.randrange(1, 12)]
            else:
                nd = bytes(rng.choice(alpha) for _ in range(rng.randrange(1, 6)))
            needles.append(nd or b"a")
        anchors = [rng.randrange(len(nd)) for nd in needles]
        start = rng.randrange(len(data) + 1)
        end = rng.randrange(start, len(data) + 1)
        cap = rng.choice((1, 2, 3, 7, 1000, 2**31, 2**61, 2**61 + 1, 2**62, 2**63 - 1))
        bad = rng.random() < 0.1
        if bad:  # invalid arguments must raise, not crash
            which = rng.randrange(5)
            if which == 0:
                start, end = end + 1, start
            elif which == 1:
                end = len(data) + rng.randrange(1, 2**40)
            elif which == 2:
                anchors[0] = rng.choice((-1, len(needles[0]), 2**62))
            elif which == 3:
                cap = rng.choice((0, -1, -2**63))
            else:
                needles[0] = rng.choice((b"", "str", None))
        for label, buf, _, close in wrappers(data):
            try:
                if bad:
                    try:
                        self.scan.find_all(buf, start, end, needles, anchors, cap)
                    except (ValueError, TypeError, OverflowError, MemoryError):
                        pass
                    continue
                got, at = [], start
                while True:
                    part, resume = self.scan.find_all(buf, at, end, needles, anchors, cap)
                    got += part
                    if resume < 0:
                        break
                    assert resume > at
                    at = resume
                ref = set()
                for nd in needles:
                    p = data.find(nd, start, end)
                    while p >= 0 and p + len(nd) <= end:
                        ref.add(p)
                        p = data.find(nd, p + 1, end)
                if got != sorted(ref):
                    self._saved("findall", {"data": data.hex(), "start": start, "end": end,
                                            "needles": [n.hex() for n in needles], "cap": cap})
                    raise AssertionError(f"find_all {label} {got} != {sorted(ref)}")
            finally:
                close()

    # -- BLAKE3
    def b3_one(self, rng: random.Random, lines: list[bytes]) -> None:
        self.tick("b3")
        parts = [rng.choice(lines)[:rng.choice((0, 1, 63, 64, 65, 1023, 1024, 1025, 4096, 16384,
                                                 16385, 10**6))] if rng.random() < 0.7
                 else rng.randbytes(rng.randrange(0, 3000)) for _ in range(rng.randrange(1, 40))]
        data = b"\n".join(parts)
        offs, lens = [], []
        o = 0
        for p in parts:
            offs.append(o)
            lens.append(len(p))
            o += len(p) + 1
        if rng.random() < 0.3:  # random ranges, the last one ending at the very end
            n = rng.randrange(1, 30)
            offs, lens = [], []
            for _ in range(n):
                a = rng.randrange(len(data) + 1)
                offs.append(a)
                lens.append(rng.randrange(len(data) - a + 1))
            offs.append(max(0, len(data) - rng.choice((0, 1, 64, 65, 200))))
            lens.append(len(data) - offs[-1])
        want = [self.blake3.blake3(data[o:o + n]).digest(length=8).hex()
                for o, n in zip(offs, lens)]
        for k in self.kernels:
            self.b3._set_kernel(k)
            for label, buf, _, close in wrappers(data):
                try:
                    got = self.b3.digest_many(buf, array("q", offs), lens)
                    assert got == want, (k, label)
                    exp = list(want)
                    bad_at = -1
                    if exp and rng.random() < 0.5:
                        bad_at = rng.randrange(len(exp))
                        exp[bad_at] = rng.choice(("0" * 16, exp[bad_at][:15], exp[bad_at].upper(),
                                                  "é" * 16, None, 12, exp[bad_at] + "0"))
                        if exp[bad_at] == want[bad_at]:
                            bad_at = -1
                    got_v = self.b3.verify_many(buf, offs, array("q", lens), exp)
                    first = next((i for i, (a, b) in enumerate(zip(exp, want)) if a != b), -1)
                    assert got_v == first, (k, label, got_v, first)
                    sl = self.b3.split_lines(buf)
                    assert (list(sl[0]), list(sl[1])) == tuple(
                        map(list, self.native.py_split_lines(data))), label
                    assert self.b3.framed(buf, offs, lens) == self.native.py_framed(data, offs, lens)
                except AssertionError:
                    self._saved("b3", {"data": data.hex()[:200000], "offs": offs, "lens": lens})
                    raise
                finally:
                    close()
        self.b3._set_kernel(self.kernels[0])
        # invalid ranges raise
        for o, n in ((-1, 1), (0, len(data) + 1), (len(data) + 1, 0), (2**62, 2**62), (1, -1)):
            try:
                self.b3.digest_many(data, [o], [n])
            except ValueError:
                pass
            else:
                raise AssertionError(f"digest_many accepted [{o}, +{n}) of {len(data)}")

    # -- fill
    def fill_one(self, rng: random.Random, lines: list[bytes]) -> None:
        self.tick("fill")
        body = b"".join(rng.choice(lines)[:rng.choice((0, 1, 10, 100, 2000, 20000))]
                        + rng.choice((b"\n", b"\n", b"", b"\n\n")) for _ in range(rng.randrange(0, 30)))
        size = rng.choice((1, 2, 17, 64, 100, 1000, 4096, 8192, 65536, 200000))
        carry = rng.randbytes(rng.randrange(0, min(size, 300) + 1)).replace(b"\n", b"x") \
            if rng.random() < 0.5 else b""
        base = rng.choice((0, 1, 12345, 2**40, 2**62, 2**63 - 1 - size, 2**63 - size, 2**63 - 1,
                           -5, -2**63))
        if base > 2**63 - 1 - size:  # base + an offset in dst would overflow int64: refused
            try:
                self.b3.fill(0, bytearray(size), None, 0, 0, base)
            except OverflowError:
                return
            raise AssertionError(f"fill accepted base {base} for {size} bytes")
        same = rng.random() < 0.5
        results = []
        for impl in ("native", "py"):
            dst = Exact(b"\x00" * size) if impl == "native" else None
            dview = dst.view if dst else bytearray(size)
            if same:
                dview[:len(carry)] = carry
                src, frm = dview, 0
            else:
                pad = rng.randrange(5)
                src, frm = b"#" * pad + carry, pad
            via = rng.choice(("file", "pipe"))
            try:
                if via == "file":
                    with tempfile.TemporaryFile() as f:
                        f.write(body)
                        f.flush()
                        f.seek(0)
                        r = (self.b3.fill if impl == "native" else self.native.py_fill)(
                            f.fileno(), dview, src, frm, frm + len(carry), base)
                else:
                    rfd, wfd = os.pipe()
                    t = threading.Thread(target=_writer, args=(wfd, body, rng.randrange(1, 5000)))
                    t.start()
                    try:
                        r = (self.b3.fill if impl == "native" else self.native.py_fill)(
                            rfd, dview, src, frm, frm + len(carry), base)
                    finally:
                        os.close(rfd)  # a writer blocked on a full pipe gets EPIPE and stops
                        t.join()
                results.append((r, bytes(dview[:r[0]])))
            finally:
                if dst:
                    dst.close()
        (rn, bn), (rp, bp) = results
        if rn != rp or bn != bp:
            self._saved("fill", {"body": body.hex(), "size": size, "carry": carry.hex(), "base": base})
            raise AssertionError(f"fill differs: {rn[:2]} {rp[:2]}")
        # bad carries raise
        frm, to = rng.choice(((-1, 2), (3, 2), (0, 7), (0, 6), (-2**63, 2**63 - 1), (2**63 - 1, -2**63),
                              (1, 2**63 - 1)))
        try:
            self.b3.fill(0, bytearray(4), b"abcdef", frm, to, 0)
        except ValueError:
            pass
        else:
            raise AssertionError(f"fill accepted the carry [{frm}, {to})")


def _writer(fd: int, body: bytes, chunk: int) -> None:
    try:
        for i in range(0, len(body), chunk):
            os.write(fd, body[i:i + chunk])
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- drivers


def random_fuzz(chk: Checker, targets: list[str], seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    lines = corpus_records()
    t0 = time.time()
    last = t0
    while time.time() - t0 < seconds:
        tgt = rng.choice(targets)
        if tgt == "scan":
            line = rng.choice(lines)
            if rng.random() < 0.05:
                line = rng.randbytes(rng.randrange(0, 200))
            elif rng.random() < 0.85:
                line = mutate(rng, line)
            if rng.random() < 0.5:
                lit = rng.choice(LITS)
            else:  # a piece of the line itself
                i = rng.randrange(len(line) + 1)
                lit = bytes(c for c in line[i:i + rng.randrange(1, 8)]
                            if 0x20 <= c <= 0x7E and c not in b'"\\') or b"x"
            chk.scan_one(line, lit)
        elif tgt == "findall":
            chk.find_all_one(rng)
        elif tgt == "b3":
            chk.b3_one(rng, lines)
        else:
            chk.fill_one(rng, lines)
        if time.time() - last > 30:
            last = time.time()
            print(f"{last - t0:.0f}s {chk.counts}", flush=True)
    print(f"done in {time.time() - t0:.0f}s, seed {seed}: {chk.counts}", flush=True)


def atheris_fuzz(chk: Checker, target: str, argv: list[str]) -> None:
    import atheris
    lines = corpus_records()

    def one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        rng = random.Random(fdp.ConsumeInt(8))  # the mutator drives the seed and the raw bytes
        if target == "scan":
            how = fdp.ConsumeIntInRange(0, 3)
            raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096))
            lit = bytes(c for c in fdp.ConsumeBytes(8) if 0x20 <= c <= 0x7E and c not in b'"\\')
            lit = lit or rng.choice(LITS)
            if how == 0:
                line = raw
            elif how == 1:  # libFuzzer's bytes spliced into a real record
                line = rng.choice(lines)
                i = rng.randrange(len(line) + 1)
                line = line[:i] + raw + line[i + rng.randrange(0, 50):]
            else:
                line = mutate(rng, rng.choice(lines))
            chk.scan_one(line, lit)
        elif target == "findall":
            chk.find_all_one(rng)
        elif target == "b3":
            chk.b3_one(rng, lines)
        else:
            chk.fill_one(rng, lines)

    # Python-side coverage only (which mutation, decoded or not, certain or not): gcc gives no
    # libFuzzer coverage of the C code, so that part of the search is blind
    one = atheris.instrument_func(one)
    globals()["mutate"] = atheris.instrument_func(mutate)
    Checker.scan_one = atheris.instrument_func(Checker.scan_one)
    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("build", "pytest", "fuzz", "atheris"))
    ap.add_argument("san", help="directory of the sanitized builds")
    ap.add_argument("--target", default="all", choices=("all", "scan", "findall", "b3", "fill"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="write failing inputs here")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:len(argv) - len(rest) - (1 if "--" in argv else 0)])
    a.rest = rest  # after --: pytest or libFuzzer arguments
    if a.cmd == "build":
        build(a.san)
        return
    scan, b3, native = load(a.san)
    print(f"sanitized: {scan.__file__}, {b3.__file__}; kernels {b3._kernels()}", flush=True)
    if a.cmd == "pytest":
        import pytest
        os.chdir(ROOT)
        sys.exit(pytest.main(a.rest))
    chk = Checker(scan, b3, native, a.save)
    targets = ["scan", "scan", "scan", "findall", "b3", "fill"] if a.target == "all" else [a.target]
    if a.cmd == "fuzz":
        random_fuzz(chk, targets, a.seconds, a.seed)
    else:
        atheris_fuzz(chk, "scan" if a.target == "all" else a.target, a.rest)


if __name__ == "__main__":
    main()
