"""The log's hash chain: every record carries a digest of every byte written before it.

Why: a log is the truth of a run, and an edit that keeps the JSON valid (a tool result's text
changed, a line deleted, two turns swapped, the last records dropped) folded and verified
``ok``. The chain makes each such change name itself (docs/format.md, "The chain"; decision
0420).

The format (version 1). The writer ends every record's line with one more key, spliced in
before the closing brace: ``,"c":[n,"h"]`` — ``n`` the record's 1-based number in the log, ``h``
the first 8 bytes (16 hex digits) of BLAKE3 over every byte of the file before ``h``'s first
digit: all earlier lines with their newlines, and this line up to and including ``"c":[n,"``.
The first line says the version before it: ``,"chain":1,"c":[1,"…"]}``. The decoders skip both
keys (unknown keys are ignored), so a reader that does not know them reads the records as
before. A log whose first line has no ``chain`` key is *unchained* (written before the chain):
it is read as always and reported so.

A log's **head** is BLAKE3 (32 bytes, 64 hex digits) over all its complete lines — what
``b3sum`` prints for a log without a torn tail. ``h`` covers its own line, so an edit of any
line but in its last 20 bytes breaks that line's own digest; the last line's digest covers
everything before it, so one pass of BLAKE3 over the file checks the whole chain (``check``'s
fast path), at the speed of BLAKE3; only a broken chain is walked line by line to name the
first line where it breaks and how (``edited``, ``inserted``, ``deleted``, ``reordered``).
Records cut off the end at a record boundary leave a shorter chain that is whole: they are
found against a head kept of the log before (``--against``, a signature, a child's link:
``truncated``). A torn tail (a crash mid-append) is not read and never called tampering.

The writer keeps a running BLAKE3 state (``Running``): one ``update`` of the line and one
8-byte ``digest`` per append; reopening a chained log hashes it once (and refuses it when its
chain is broken: ``ChainBroken``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path

import blake3
import msgspec

from ..errors import ConfigError
from . import log as _log
from .log import FIRST, Running
from .errors import LogRefused
from .chainhead import (HEX_FROM_END, SUFFIX, TAIL, VERSION, VERSIONED, complete, examine,
                        feed as _hash, parse as _parse, run_head)

KINDS = ("edited", "inserted", "deleted", "reordered", "truncated", "rewritten", "version")


class ChainBroken(LogRefused):
    """A chained log whose chain breaks: the first line where it does and the kind of change.
    Resume refuses such a log (``mnemon verify`` names the same line)."""

    def __init__(self, path: str, line: int, kind: str, why: str, offset: int | None = None):
        self.kind = kind
        super().__init__(path, line, f"the chain breaks here ({kind}): {why}", offset)


class Break(msgspec.Struct, frozen=True):
    """Where a chain breaks: the 1-based line (one past the last for ``truncated``), its byte
    offset, the kind (one of ``KINDS``) and a sentence saying why."""

    line: int
    offset: int
    kind: str
    why: str


class Report(msgspec.Struct):
    """What ``check`` found in one log. ``bytes``/``lines``: its complete lines (a torn tail
    is not counted); ``head``: BLAKE3 over them; ``at``: BLAKE3 of the first B bytes for each
    mark B asked for that the log reaches."""

    chained: bool
    version: int | None
    bytes: int
    lines: int
    head: str
    broken: Break | None = None
    at: dict[int, str] = msgspec.field(default_factory=dict)


def strip(line: bytes) -> bytes:
    """A chained line without its chain keys: the record's own encoding (an unchained line is
    returned as it is)."""
    tail = line[-TAIL:]
    m = SUFFIX.search(tail)
    if m is None:
        return line
    body = line[:len(line) - len(tail) + m.start()]
    if body.endswith(b',"chain":1'):
        body = body[:-len(b',"chain":1')]
    return body + b"}"


def _complete(path: Path) -> int:
    """The bytes of a log's complete lines (a torn tail is not read, nor counted)."""
    with open(path, "rb", buffering=0) as f:
        return complete(f.fileno())


def check(path: Path, display: str, marks: Iterable[int] = (), *,
          keep: list | None = None, threads: int = blake3.blake3.AUTO) -> Report:
    """Check a log's chain and compute its head (and BLAKE3 of its first B bytes for each
    mark B): one pass of BLAKE3 over the file when the chain is whole; a broken one is walked
    line by line to name where it breaks (``Report.broken``). Never modifies the file.
    ``keep``: given a list, the BLAKE3 state at the end of a whole chain is appended to it
    (the writer goes on from it). ``threads``: BLAKE3's own (1 beside a fold that uses the
    other core)."""
    end = _complete(path)
    want = sorted({m for m in marks if 0 <= m <= end})
    # the state a writer goes on from is the writer's own kind (the native Chain when built:
    # one thread, all SIMD lanes — resume runs it beside the fold on one core)
    h = _log.hasher() if keep is not None else blake3.blake3(max_threads=threads)
    with open(path, "rb", buffering=0) as f:
        got = examine(f.fileno(), end, want, h)
    if got is None:
        return walk(path, display, want)
    version, lines, head, at = got
    if version != VERSION:
        broken = None if version is None else Break(
            1, 0, "version", f"chain version {version} is not known to this mnemon "
            "(it knows 1)")
        return Report(version is not None, version, end, lines, head, broken, at)
    if keep is not None:
        keep.append(h)
    return Report(True, VERSION, end, lines, head, at=at)


def resume_state(path: Path, display: str, threads: int = 1) -> Running | None:
    """The running chain a writer reopening a log goes on from: None when the log is
    unchained; ``ChainBroken`` (naming the line and the kind) when its chain is broken — an
    append after a broken chain would chain new records onto bytes no writer wrote."""
    keep: list = []
    report = check(path, display, keep=keep, threads=threads)
    if not report.chained:
        return None
    if report.broken is not None:
        b = report.broken
        raise ChainBroken(display, b.line, b.kind, b.why + " — resume refused; `mnemon verify` "
                          "names every problem", b.offset)
    return Running(keep[0], report.lines)


class Beside(threading.Thread):
    """``resume_state`` in a thread beside the fold of the same log: BLAKE3 releases the GIL,
    so the chain is checked on the core the fold's decoder leaves (its reader thread is mostly
    waiting), and a resume costs the fold's time, not the fold's plus a pass over the file."""

    def __init__(self, path: Path, display: str):
        super().__init__(name="mnemon-chain", daemon=True)
        self.args_ = (path, display)
        self.out: Running | None = None
        self.err: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.out = resume_state(*self.args_)
        except BaseException as e:  # handed to the caller by ``result``
            self.err = e

    def result(self) -> Running | None:
        self.join()
        if self.err is not None:
            raise self.err
        return self.out


def walk(path: Path, display: str, marks: list[int] | None = None) -> Report:
    """Check a chained log line by line: the first line where the chain breaks and its kind.

    Every line before the break has its number in order and its digest right. At the first
    that does not, the kind is told from the numbers and digests around it: the next line
    checks out in this line's place (``inserted``, or ``reordered`` when this line's number is
    found nowhere else); this line's own number but a wrong digest (``edited``); this line's
    number found further on (``reordered``); a wrong number where the next line's is in order
    again (``edited``); a number ahead of its place (``deleted``); a number already used
    (``inserted``)."""
    end = _complete(path)
    want = sorted(m for m in (marks or []) if 0 <= m <= end)
    h = blake3.blake3()
    items = _log.iter_lines(path)
    idx = 0
    broken: Break | None = None
    for off, view in items:
        idx += 1
        line = bytes(view)
        fault = _fault(h, idx, line)
        if fault is not None:
            rest = [(o, bytes(v)) for o, v in items]
            broken = _kind(h, idx, off, line, rest, fault)
            idx += len(rest)
            break
        h.update(line)
        h.update(b"\n")
    # the head is BLAKE3 of the bytes whether or not the chain holds
    full = blake3.blake3(max_threads=blake3.blake3.AUTO)
    at: dict[int, str] = {}
    with open(path, "rb", buffering=0) as f:
        _hash(f.fileno(), end, want, full, at)
    head = full.digest().hex()
    at.update({x: head for x in want if x == end})
    return Report(True, VERSION, end, idx, head, broken, at)


def _fault(h: "blake3.blake3", idx: int, line: bytes) -> str | None:
    """Why line ``idx`` does not continue the chain ``h`` ends in, or None when it does."""
    p = _parse(line[-TAIL:])
    if p is None:
        return "it has no chain key"
    n, hx = p
    if idx == 1 and not VERSIONED.search(line[-TAIL:]):
        return "the first line does not say the chain's version"
    if n != idx:
        return f"it says it is record {n}"
    g = h.copy()
    g.update(memoryview(line)[:len(line) - HEX_FROM_END])
    if g.digest(length=8).hex() != hx:
        return "its digest is not that of the bytes before it"
    return None


def _kind(h: "blake3.blake3", idx: int, off: int, line: bytes,
          rest: list[tuple[int, bytes]], fault: str) -> Break:
    """Tell the kind of the first break, at line ``idx`` (see ``walk``)."""
    p = _parse(line[-TAIL:])
    later = [q[0] if q is not None else None for q in (_parse(x[-TAIL:]) for _, x in rest)]
    if rest:  # does the next line check out in this one's place? then this one was put in
        if _fault(h.copy(), idx, rest[0][1]) is None:
            if p is not None and p[0] > idx and later.count(p[0]) == 0:
                return Break(idx, off, "reordered", f"it says it is record {p[0]} and record "
                             f"{idx} follows it: records were moved")
            return Break(idx, off, "inserted", "a line that was not written here: the next "
                         f"line continues the chain from line {idx - 1}")
    if p is None:  # replaced (the numbers go on after it), its key mangled, or added
        kind = "edited" if b'"c":[' in line or (later and later[0] == idx + 1) else "inserted"
        return Break(idx, off, kind, fault + (" (its chain key was changed)" if kind == "edited"
                                              else " (a line no chained writer wrote)"))
    n, _ = p
    if n == idx:
        return Break(idx, off, "edited", f"{fault}: this line was changed after it was written")
    if idx in later:
        return Break(idx, off, "reordered", f"{fault}, and record {idx} comes later: records "
                     "were moved")
    if later and later[0] == idx + 1:  # this line alone is out of place: its number changed
        return Break(idx, off, "edited", f"{fault}: this line was changed after it was written")
    if n > idx:
        gap = n - idx
        return Break(idx, off, "deleted", f"{fault}: {gap} record{'s' if gap > 1 else ''} "
                     f"before it {'were' if gap > 1 else 'was'} deleted")
    return Break(idx, off, "inserted", f"{fault}, a number already used: a line was added")


# ----------------------------------------------------------------- heads kept elsewhere


class Kept(msgspec.Struct):
    """Heads kept earlier (``mnemon verify --head`` output, text or ``--json``)."""

    logs: dict[str, tuple[int, int, str]]  # path → (bytes, lines, head)
    run: str | None


_HEAD_LINE = re.compile(r"\A([0-9a-f]{64}) +([0-9]{1,15}) +([0-9]{1,15}) +(\S+) +(.{1,4096})\Z")
_RUN_LINE = re.compile(r"\A([0-9a-f]{64}) +run\Z")


class HeadsUnreadable(ConfigError):
    """A heads file that is not what ``mnemon verify --head`` writes."""


def read_kept(path: Path) -> Kept:
    """Parse a heads file; a malformed one is refused naming its line (exit 2)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HeadsUnreadable(f"{path}: cannot read the heads ({e})") from None
    logs: dict[str, tuple[int, int, str]] = {}
    run = None
    if text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
            for item in obj["logs"]:
                logs[str(item["path"])] = (int(item["bytes"]), int(item["lines"]),
                                           _hex64(str(item["head"])))
            run = _hex64(str(obj["run"])) if obj.get("run") is not None else None
        except (ValueError, KeyError, TypeError) as e:
            raise HeadsUnreadable(f"{path}: not the JSON of 'mnemon verify --head --json' "
                                  f"({type(e).__name__})") from None
        return Kept(logs, run)
    for i, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = _RUN_LINE.match(s)
        if m:
            run = m[1]
            continue
        m = _HEAD_LINE.match(s)
        if not m:
            raise HeadsUnreadable(f"{path}:{i}: not a line of 'mnemon verify --head' "
                                  "(<head> <bytes> <lines> <chain> <path>, or <head> run)")
        logs[m[5]] = (int(m[2]), int(m[3]), m[1])
    return Kept(logs, run)


def _hex64(s: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", s):
        raise ValueError("a head is 64 hex digits")
    return s


# ----------------------------------------------------------------- signatures (extra ``sign``)

SIG_SUFFIX = ".sig"
KEY_ENV = "MNEMON_SIGN_KEY"


class SigningUnavailable(ConfigError):
    """A key was given but the ``sign`` extra (``cryptography``) is not installed."""


class KeyUnreadable(ConfigError):
    """The key file is not an Ed25519 key in PEM."""


def message(source: str, size: int, lines: int, head: str) -> bytes:
    """What a signature signs: the log's path in the run, its length, lines and head."""
    return f"mnemon chain head 1\n{source}\n{size}\n{lines}\n{head}\n".encode()


def _crypto():
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise SigningUnavailable("signing chain heads needs the 'sign' extra: pip install "
                                 "'mnemon[sign]'") from None
    return ed25519, serialization


@functools.lru_cache(maxsize=4)
def _private(path: str):
    ed25519, serialization = _crypto()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise KeyUnreadable(f"{KEY_ENV}={path}: not an unencrypted Ed25519 private key in PEM "
                            f"({type(e).__name__})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise KeyUnreadable(f"{KEY_ENV}={path}: not an Ed25519 key")
    return key


def signing_key():
    """The user's signing key (``MNEMON_SIGN_KEY``: a PEM file), or None when none is set."""
    path = os.environ.get(KEY_ENV)
    return _private(path) if path else None


def public_hex(path: Path) -> str:
    """The raw public key (64 hex digits) of a PEM public or private Ed25519 key file."""
    ed25519, serialization = _crypto()
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise KeyUnreadable(f"{path}: cannot read the key ({e.strerror})") from None
    try:
        if b"PRIVATE KEY" in data:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise KeyUnreadable(f"{path}: not an Ed25519 key in PEM ({type(e).__name__})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise KeyUnreadable(f"{path}: not an Ed25519 key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def sign(log: Path, source: str, size: int, lines: int, head: str, key) -> Path:
    """Write ``record.jsonl.sig`` beside the log: the head, signed (atomically replaced)."""
    _, serialization = _crypto()
    pub = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw).hex()
    body = {"format": 1, "source": source, "bytes": size, "lines": lines, "head": head,
            "key": pub, "sig": key.sign(message(source, size, lines, head)).hex()}
    out = log.with_name(log.name + SIG_SUFFIX)
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(body) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return out


class Signed(msgspec.Struct, frozen=True):
    format: int
    source: str
    bytes: int
    lines: int
    head: str
    key: str
    sig: str


def read_signature(log: Path) -> Signed | None:
    """The signature beside a log, or None; a malformed one raises ``ValueError``."""
    p = log.with_name(log.name + SIG_SUFFIX)
    try:
        with open(p, "rb") as f:
            data = f.read(1 << 16)  # a signature is ~400 bytes: a larger file is not one
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"cannot read the signature ({e.strerror})") from None
    try:
        return msgspec.json.decode(data, type=Signed)
    except msgspec.DecodeError as e:
        raise ValueError(f"not a signature file ({e})") from None


def signature_valid(s: Signed) -> bool:
    ed25519, _ = _crypto()
    try:
        pub = ed25519.Ed25519PublicKey.from_public_bytes(bytes.fromhex(s.key))
        pub.verify(bytes.fromhex(s.sig), message(s.source, s.bytes, s.lines, s.head))
        return True
    except Exception:  # InvalidSignature, a malformed key or signature
        return False


__all__ = ["VERSION", "Running", "resume_state", "check", "walk", "Report", "Break", "ChainBroken", "run_head",
           "read_kept", "Kept", "HeadsUnreadable", "sign", "read_signature", "signature_valid",
           "signing_key", "public_hex", "message", "KINDS", "SIG_SUFFIX", "KEY_ENV"]
