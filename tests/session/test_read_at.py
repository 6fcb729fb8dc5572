"""``read_at``: a Pointer's records, digest-checked before parsing."""

from __future__ import annotations

import pytest

from mnemon.session.errors import DigestMismatch
from mnemon.session.log import read_at
from mnemon.session.records import Pointer, UserPrompt

from ..helpers import new_agent, prompt, tool_turn


def test_read_at_answers_the_records_and_refuses_a_flipped_byte(run_root):
    log = new_agent(run_root, "a1")
    tid = prompt(log, "find the flaky test")
    t2 = tool_turn(log, "looking", "pytest -x", "1 failed")
    path = run_root / "agents/a1/record.jsonl"
    ptr = log.ctx.turn(t2).pointer
    recs = read_at(path, ptr)
    assert [type(r).__name__ for r in recs] == ["AssistantMessage", "ToolResults"]
    first = read_at(path, log.ctx.turn(tid).pointer)
    assert first == [UserPrompt(turn=tid, text="find the flaky test")]
    off, length, _ = ptr.loci[1]
    data = bytearray(path.read_bytes())
    data[off + length // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DigestMismatch) as e:
        read_at(path, ptr)
    assert e.value.offset == off and "agents/a1/record.jsonl" in str(e.value)
    with pytest.raises(DigestMismatch):
        read_at(path, Pointer(ptr.source, [ptr.loci[1]]))
