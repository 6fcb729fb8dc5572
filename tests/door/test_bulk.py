"""The bulk count of a common literal (native digest check + raw-JSON line count) answers exactly
what decoding every record answers: over a lineage, over foreign-written lines, and when a record
was altered. Windows are made small so that a few MB cross many of them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import msgspec
import pytest

import mnemon.session.door.scan as door_mod
from tests.helpers import door_open
from mnemon.session import native
from mnemon.session.door import Door
from mnemon.session.errors import Refusal
from mnemon.session.records import SessionStarted, UserPrompt, encode

pytestmark = pytest.mark.skipif(native.count_literal is None or not native.AVAILABLE,
                                reason="the native extensions are not built")

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["return", "the", "def ", "e", "import", "self.", "QUOKKA-7f3a-ZEBRA", "nowhere-xyz"]


def _corpus_module():
    spec = importlib.util.spec_from_file_location("_bench_corpus", ROOT / "bench" / "_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_bench_corpus", mod)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def lineage(tmp_path_factory):
    out = tmp_path_factory.mktemp("bulk") / "run"
    _corpus_module().build_corpus(out, 3_000_000, children=1)
    return out


@pytest.fixture
def small_windows(monkeypatch):
    monkeypatch.setattr(door_mod, "CHUNK", 16 << 10)
    calls = []
    real = door_mod._Counting.finish

    def spy(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(door_mod._Counting, "finish", spy)
    return calls


def _answers(door: Door, pattern: str, monkeypatch) -> tuple:
    fast = door.grep(pattern, timeout_s=60)
    slow = door.grep(pattern, timeout_s=60, shortcut=False)
    with monkeypatch.context() as m:
        m.setattr(native, "count_literal", None)
        m.setattr(native, "find_all", None)
        plain = door.grep(pattern, timeout_s=60)
    return fast, slow, plain


def test_bulk_count_equals_decoding_over_a_lineage(lineage, small_windows, monkeypatch):
    door, _ = door_open(lineage / "agents" / "c1")
    for pattern in COMMON:
        fast, slow, plain = _answers(door, pattern, monkeypatch)
        assert fast == slow == plain, pattern
    assert small_windows, "the bulk count never ran"
    # from outside the flat arrays are the checkpoint's columns; a door on the full fold keeps
    # the inherited source's arrays in the table's memo and answers the same
    from mnemon.lineage.runroot import make_loader
    from mnemon.session.resume import fold_file

    src = "agents/c1/record.jsonl"
    ctx, _ = fold_file(lineage / src, src, loader=make_loader(lineage))
    live = Door(lineage, ctx)
    assert live.grep("return", timeout_s=60) == door.grep("return", timeout_s=60)
    assert live.ctx.memo["door"]["flat"]
    assert live.grep("return", timeout_s=60) == live.grep("return", shortcut=False, timeout_s=60)


def test_an_altered_record_in_a_bulk_window_is_refused(lineage, small_windows, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(lineage, root)
    door, _ = door_open(root / "agents" / "c1")
    parent = root / "agents" / "p" / "record.jsonl"
    data = bytearray(parent.read_bytes())
    at = data.index(b"return", len(data) * 3 // 4)  # far past the kept hits
    data[at] = ord("R")
    parent.write_bytes(bytes(data))
    with pytest.raises(Refusal) as fast:
        door.grep("return", timeout_s=60)
    with pytest.raises(Refusal) as slow:
        door.grep("return", timeout_s=60, shortcut=False)
    assert str(fast.value) == str(slow.value)
    assert "agents/p/record.jsonl" in str(fast.value) and "digest mismatch" in str(fast.value)


def test_foreign_escapes_fall_back_to_decoding(run_root, small_windows, monkeypatch):
    """Lines \\u-escaped or with \\/ by another writer: the counter is unsure, the door decodes."""
    corpus = _corpus_module()
    trajs = corpus.load_trajectories()
    from tests.door._build import replay  # noqa: F401  (the builder used elsewhere)

    path = run_root / "agents" / "a1" / "record.jsonl"
    path.parent.mkdir(parents=True)
    lines = [encode(SessionStarted(agent="a1"))]
    tid = 0
    for k, row in enumerate(r for t in trajs for r in t if r["role"] in ("user", "assistant")):
        tid += 1
        rec = {"t": "UserPrompt", "turn": tid, "text": row["text"]}
        raw = encode(msgspec.convert(rec, type=UserPrompt))
        if k % 3 == 0:
            raw = json.dumps(rec, ensure_ascii=True).encode()  # spaces, \\u escapes
        elif k % 3 == 1:
            raw = raw.replace(b"/", b"\\/")
        lines.append(raw)
        if len(lines) > 3000:
            break
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    door, _ = door_open(path.parent)
    unsure = []
    real = native.count_literal

    def counting(*a):
        out = real(*a)
        unsure.append(out.count(-1))
        return out

    monkeypatch.setattr(native, "count_literal", counting)
    for pattern in [*COMMON, "/", "s/", "/t"]:
        fast, slow, plain = _answers(door, pattern, monkeypatch)
        assert fast == slow == plain, pattern
    assert small_windows
    assert sum(unsure), "no record was left to decoding"
